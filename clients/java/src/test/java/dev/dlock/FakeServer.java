package dev.dlock;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

/** A scripted HTTP server for unit tests: answers each request with what {@code answer} says. */
final class FakeServer implements AutoCloseable {
  /** An answer: status and JSON body. */
  static final class Answer {
    final int status;
    final String body;

    Answer(int status, String body) {
      this.status = status;
      this.body = body;
    }
  }

  /** "METHOD /path?query" of each request, in order. */
  final List<String> requests = new CopyOnWriteArrayList<>();
  final List<String> bodies = new CopyOnWriteArrayList<>();
  private final HttpServer server;

  FakeServer(Function<String, Answer> answer) throws IOException {
    server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    server.createContext("/", exchange -> handle(exchange, answer));
    server.start();
  }

  private void handle(HttpExchange exchange, Function<String, Answer> answer) throws IOException {
    String line = exchange.getRequestMethod() + " " + exchange.getRequestURI();
    requests.add(line);
    bodies.add(new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
    Answer a = answer.apply(line);
    byte[] body = a.body.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().add("Content-Type", "application/json");
    exchange.sendResponseHeaders(a.status, body.length == 0 ? -1 : body.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(body);
    }
  }

  String url() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  /** A client of this server alone, with short retries and no DLOCK_* variable. */
  Client client(double clockDrift) {
    return Client.builder()
        .servers(url())
        .clockDrift(clockDrift)
        .retryBudget(java.time.Duration.ofSeconds(3))
        .backoff(java.time.Duration.ofMillis(20), java.time.Duration.ofMillis(100))
        .environment(Map.of())
        .build();
  }

  /** The usual answers of a healthy dlockd: a session, keep-alives, and {@code route}'s. */
  static Answer session(String line, long ttlMs) {
    if (line.startsWith("POST /v1/sessions") && !line.contains("keepalive")) {
      return new Answer(201, "{\"session_id\":\"s-1\",\"owner\":\"t\",\"ttl_ms\":" + ttlMs + "}");
    }
    if (line.contains("/keepalive")) {
      return new Answer(200, "{\"session_id\":\"s-1\",\"ttl_ms\":" + ttlMs + "}");
    }
    if (line.startsWith("DELETE")) {
      return new Answer(204, "");
    }
    return null;
  }

  /** A server with healthy sessions of {@code ttlMs} that answers every other call so. */
  static FakeServer withSessions(long ttlMs, int status, String body) throws IOException {
    return new FakeServer(
        line -> {
          Answer usual = session(line, ttlMs);
          return usual != null ? usual : new Answer(status, body);
        });
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
