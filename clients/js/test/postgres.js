// A real PostgreSQL for the guard's test, started the way tests/support/postgres_server.cc does:
// initdb into a temporary directory, a free loopback port, trust authentication for user
// "dlock", run as "nobody" when the tests run as root; stopped and removed by stop().
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

function binDir() {
  if (process.env.DLOCK_PG_BIN_DIR) return process.env.DLOCK_PG_BIN_DIR;
  for (const version of ['15', '16', '17', '14', '13']) {
    const dir = `/usr/lib/postgresql/${version}/bin`;
    if (existsSync(join(dir, 'postgres'))) return dir;
  }
  return null;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** uid and gid of "nobody" when running as root (PostgreSQL refuses root), else {}. */
function unprivileged() {
  if (process.getuid?.() !== 0) return {};
  const line = readFileSync('/etc/passwd', 'utf8').split('\n')
    .find((l) => l.startsWith('nobody:'));
  if (!line) throw new Error('user nobody not found');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Why PostgreSQL cannot be started here, or '' when it can. */
export function postgresMissing() {
  return binDir() ? '' : 'PostgreSQL server binaries not found (install postgresql-15)';
}

/**
 * Starts PostgreSQL; resolves to { url, stop() }. `connect(url)` must resolve once a
 * connection works (the test's driver), and reject otherwise.
 */
export async function startPostgres(connect) {
  const bin = binDir();
  const root = mkdtempSync(join(tmpdir(), 'dlock-js-pg-'));
  const data = join(root, 'data');
  const user = unprivileged();
  if (user.uid !== undefined) chownSync(root, user.uid, user.gid);
  const env = { ...process.env, LC_ALL: 'C' };
  const initdb = spawnSync(join(bin, 'initdb'), ['-D', data, '-U', 'dlock', '--auth=trust',
    '-E', 'UTF8'], { ...user, env, encoding: 'utf8' });
  if (initdb.status !== 0) {
    rmSync(root, { recursive: true, force: true });
    throw new Error(`initdb failed: ${initdb.stderr}`);
  }
  const port = await freePort();
  const postmaster = spawn(join(bin, 'postgres'), ['-D', data, '-p', String(port),
    '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off',
    '-c', 'shared_buffers=32MB'], { ...user, env, stdio: 'ignore' });
  const exited = new Promise((resolve) => postmaster.once('exit', resolve));
  const stop = async () => {
    if (postmaster.exitCode === null && postmaster.signalCode === null) {
      postmaster.kill('SIGINT'); // fast shutdown
      await exited;
    }
    rmSync(root, { recursive: true, force: true });
  };
  const url = `postgresql://dlock@127.0.0.1:${port}/postgres`;
  const end = Date.now() + 60_000;
  for (;;) {
    try {
      await connect(url);
      return { url, stop };
    } catch (error) {
      if (postmaster.exitCode !== null || Date.now() > end) {
        await stop();
        throw new Error(`postgres did not start: ${error.message}`);
      }
      await delay(50);
    }
  }
}
