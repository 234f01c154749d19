// Drives tests/clients/harness.cc (tests/clients/README.md) through a pipe.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export class Harness {
  /** One harness process: the servers of one backend, started once per run. */
  static async start(binary, backend) {
    const harness = new Harness(binary, backend);
    const hello = await harness.#read();
    if (!hello.servers) {
      await harness.close();
      throw new Error(`harness for ${backend} did not start: ${JSON.stringify(hello)}`);
    }
    Object.assign(harness, {
      servers: hello.servers, authServer: hello.auth_server, tlsServer: hello.tls_server,
      tlsFiles: hello.tls, adminToken: hello.admin_token, tokens: hello.tokens,
    });
    return harness;
  }

  #process;
  #lines;
  #waiting = [];
  #buffered = [];
  /** Servers (and "backend") a scenario left down. */
  stopped = new Set();

  constructor(binary, backend) {
    this.backend = backend;
    this.#process = spawn(binary, [backend], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.#lines = createInterface({ input: this.#process.stdout });
    this.#lines.on('line', (line) => {
      const waiter = this.#waiting.shift();
      if (waiter) waiter.resolve(line);
      else this.#buffered.push(line);
    });
    this.#lines.on('close', () => {
      for (const waiter of this.#waiting.splice(0)) {
        waiter.reject(new Error(`harness for ${backend} exited`));
      }
    });
  }

  #read() {
    if (this.#buffered.length) return Promise.resolve(JSON.parse(this.#buffered.shift()));
    return new Promise((resolve, reject) => this.#waiting.push({ resolve, reject }))
      .then((line) => JSON.parse(line));
  }

  async command(line) {
    this.#process.stdin.write(line + '\n');
    const answer = await this.#read();
    if (!answer.ok) throw new Error(`harness: ${line}: ${answer.error}`);
    const words = line.split(/\s+/);
    const what = words[0].startsWith('backend_') ? 'backend' : words[words.length - 1];
    if (['kill9', 'stop', 'backend_stop'].includes(words[0])) this.stopped.add(what);
    else if (['start', 'restart', 'backend_start'].includes(words[0])) this.stopped.delete(what);
    return answer;
  }

  /** Starts whatever a scenario left stopped, so the next one finds every server up. */
  async bringBack() {
    if (this.stopped.has('backend')) await this.command('backend_start');
    for (const server of [...this.stopped].sort()) await this.command(`start ${server}`);
  }

  async close() {
    if (this.#process.exitCode !== null) return;
    const exited = new Promise((resolve) => this.#process.once('exit', resolve));
    this.#process.stdin.end('quit\n');
    const timer = setTimeout(() => this.#process.kill('SIGKILL'), 60_000);
    await exited;
    clearTimeout(timer);
  }
}
