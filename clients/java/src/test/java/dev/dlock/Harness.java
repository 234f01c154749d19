package dev.dlock;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

/** Drives tests/clients/harness.cc (tests/clients/README.md) through a pipe. */
final class Harness implements AutoCloseable {
  final String backend;
  final List<String> servers = new ArrayList<>();
  final String authServer;
  final String tlsServer;
  final Map<String, Object> tlsFiles;
  final String adminToken;
  final Map<String, Object> tokens;
  private final Process process;
  private final BufferedReader out;
  private final Writer in;
  private final TreeSet<String> stopped = new TreeSet<>(); // servers (and "backend") left down

  @SuppressWarnings("unchecked")
  Harness(String binary, String backend) throws IOException {
    this.backend = backend;
    process =
        new ProcessBuilder(binary, backend)
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start();
    out =
        new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
    Map<String, Object> hello = read();
    if (!hello.containsKey("servers")) {
      close();
      throw new IOException("harness for " + backend + " did not start: " + hello);
    }
    for (Object server : (List<Object>) hello.get("servers")) {
      servers.add((String) server);
    }
    authServer = (String) hello.get("auth_server");
    tlsServer = (String) hello.get("tls_server");
    tlsFiles = Json.obj(hello, "tls");
    adminToken = (String) hello.get("admin_token");
    tokens = Json.obj(hello, "tokens");
  }

  private Map<String, Object> read() throws IOException {
    String line = out.readLine();
    if (line == null) {
      throw new IOException("harness for " + backend + " exited");
    }
    return Json.parseObject(line);
  }

  synchronized Map<String, Object> command(String line) throws IOException {
    in.write(line + "\n");
    in.flush();
    Map<String, Object> answer = read();
    if (!Boolean.TRUE.equals(answer.get("ok"))) {
      throw new IOException(line + ": " + answer.get("error"));
    }
    String[] words = line.split(" ");
    String what = words[0].startsWith("backend_") ? "backend" : words[words.length - 1];
    switch (words[0]) {
      case "kill9":
      case "stop":
      case "backend_stop":
        stopped.add(what);
        break;
      case "start":
      case "restart":
      case "backend_start":
        stopped.remove(what);
        break;
      default:
        break;
    }
    return answer;
  }

  /** Starts whatever a scenario left stopped, so the next one finds every server up. */
  void bringBack() throws IOException {
    if (stopped.contains("backend")) {
      command("backend_start");
    }
    for (String server : new ArrayList<>(stopped)) {
      command("start " + server);
    }
  }

  @Override
  public void close() throws IOException {
    if (process.isAlive()) {
      try {
        in.write("quit\n");
        in.flush();
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
          process.destroyForcibly();
        }
      } catch (IOException | InterruptedException gone) {
        process.destroyForcibly();
      }
    }
  }
}
