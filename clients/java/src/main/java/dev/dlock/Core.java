package dev.dlock;

import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;
import java.util.regex.Pattern;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * What Client, Session and Lock share: resolved options, the servers, the retry loop with
 * failover, and one method per C3 route.
 */
final class Core {
  static final String DEFAULT_SERVER = "http://127.0.0.1:7070";
  private static final Pattern BEARER = Pattern.compile("^[A-Za-z0-9\\-._~+/]+=*$");

  final List<String> servers;
  final String token;
  final String adminToken;
  final double clockDrift;
  final long requestTimeout; // nanoseconds, as every duration below
  final long retryBudget;
  final long backoffInitial;
  final long backoffMax;
  final String namespace;
  final String owner; // DLOCK_OWNER, "" when unset
  private final HttpClient http;
  private SSLContext tls; // null unless a server is https://
  private SSLParameters tlsParameters;
  private final Random random = new Random();
  private int current;

  Core(Client.Builder options) {
    Map<String, String> env = options.environment;
    servers = resolveServers(options.servers, env);
    token = resolveToken(options.token, options.tokenFile, env);
    String admin = firstSet(options.adminToken, env.get("DLOCK_ADMIN_TOKEN"));
    adminToken = admin.isEmpty() ? "" : checkBearer(admin, "adminToken");
    if (options.clockDrift != null) {
      clockDrift =
          Lease.checkClockDrift(options.clockDrift, "clockDrift", options.clockDrift.toString());
    } else {
      String drift = firstSet(null, env.get("DLOCK_CLOCK_DRIFT"));
      clockDrift =
          drift.isEmpty()
              ? Lease.DEFAULT_CLOCK_DRIFT
              : Lease.parseClockDrift(drift, "DLOCK_CLOCK_DRIFT");
    }
    requestTimeout = options.requestTimeout.toNanos();
    retryBudget = options.retryBudget.toNanos();
    backoffInitial = options.backoffInitial.toNanos();
    backoffMax = options.backoffMax.toNanos();
    namespace =
        options.namespace != null ? options.namespace : firstSet(null, env.get("DLOCK_NAMESPACE"));
    owner = firstSet(null, env.get("DLOCK_OWNER"));
    HttpClient.Builder builder =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .followRedirects(HttpClient.Redirect.NEVER)
            .connectTimeout(options.requestTimeout);
    if (servers.stream().anyMatch(s -> s.toLowerCase(Locale.ROOT).startsWith("https://"))) {
      SSLContext tls =
          TlsFiles.context(
              firstSet(options.caFile, env.get("DLOCK_CACERT")),
              firstSet(options.certFile, env.get("DLOCK_CERT")),
              firstSet(options.keyFile, env.get("DLOCK_KEY")));
      SSLParameters parameters = new SSLParameters();
      parameters.setProtocols(new String[] {"TLSv1.3", "TLSv1.2"});
      builder.sslContext(tls).sslParameters(parameters);
      this.tls = tls;
      tlsParameters = parameters;
    }
    http = builder.build();
  }

  private static String firstSet(String option, String env) {
    if (option != null && !option.isBlank()) {
      return option.strip();
    }
    return env == null ? "" : env.strip();
  }

  private static String checkBearer(String token, String name) {
    if (!BEARER.matcher(token).matches()) {
      throw new DlockException.InvalidArgument(
          name + ": not a bearer token (letters, digits and -._~+/, then optional '=' padding;"
              + " e.g. from dlock token new)",
          name, 0);
    }
    return token;
  }

  private static String readTokenFile(String path, String name) {
    String line;
    try {
      List<String> lines = Files.readAllLines(Path.of(path), StandardCharsets.UTF_8);
      line = lines.isEmpty() ? "" : lines.get(0).stripTrailing();
    } catch (IOException | RuntimeException error) {
      throw new DlockException.InvalidArgument(
          name + ": cannot read a token from '" + path + "': " + error.getClass().getSimpleName(),
          name, 0);
    }
    if (line.isEmpty()) {
      throw new DlockException.InvalidArgument(
          name + ": the first line of '" + path + "' is empty", name, 0);
    }
    return checkBearer(line, name + " ('" + path + "')");
  }

  /**
   * The option, else the first line of tokenFile, else DLOCK_TOKEN, else the first line of the
   * file DLOCK_TOKEN_FILE names; "" when none is set (contract C6, as the CLI).
   */
  static String resolveToken(String token, String tokenFile, Map<String, String> env) {
    if (token != null && !token.isEmpty()) {
      return checkBearer(token, "token");
    }
    if (tokenFile != null && !tokenFile.isEmpty()) {
      return readTokenFile(tokenFile, "tokenFile");
    }
    String fromEnv = firstSet(null, env.get("DLOCK_TOKEN"));
    if (!fromEnv.isEmpty()) {
      return checkBearer(fromEnv, "DLOCK_TOKEN");
    }
    String path = firstSet(null, env.get("DLOCK_TOKEN_FILE"));
    if (!path.isEmpty()) {
      return readTokenFile(path, "DLOCK_TOKEN_FILE");
    }
    return "";
  }

  static List<String> resolveServers(List<String> given, Map<String, String> env) {
    List<String> listed = new ArrayList<>();
    for (String server : given) {
      for (String part : server.split(",")) {
        if (!part.isBlank()) {
          listed.add(part.strip());
        }
      }
    }
    if (listed.isEmpty()) {
      for (String part : firstSet(null, env.get("DLOCK_SERVER")).split(",")) {
        if (!part.isBlank()) {
          listed.add(part.strip());
        }
      }
    }
    if (listed.isEmpty()) {
      listed.add(DEFAULT_SERVER);
    }
    List<String> bases = new ArrayList<>();
    for (String url : listed) {
      URI uri;
      try {
        uri = URI.create(url);
      } catch (IllegalArgumentException bad) {
        uri = null;
      }
      String scheme = uri == null ? null : uri.getScheme();
      if (uri == null
          || uri.getHost() == null
          || !("http".equalsIgnoreCase(scheme) || "https".equalsIgnoreCase(scheme))) {
        throw new DlockException.InvalidArgument(
            "server: '" + url + "' is not an http:// or https:// URL", "server", 0);
      }
      bases.add(url.replaceAll("/+$", ""));
    }
    return List.copyOf(bases);
  }

  static String quote(String text) {
    return URLEncoder.encode(text, StandardCharsets.UTF_8).replace("+", "%20");
  }

  /** {@code ?a=b&c=d} of the pairs whose value is set; "" when none is. */
  static String query(Object... pairs) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i + 1 < pairs.length; i += 2) {
      Object value = pairs[i + 1];
      if (value == null || value.toString().isEmpty()) {
        continue;
      }
      out.append(out.length() == 0 ? '?' : '&');
      out.append(quote(pairs[i].toString())).append('=').append(quote(value.toString()));
    }
    return out.toString();
  }

  String ns(String ns) {
    return ns != null ? ns : namespace;
  }

  // --- one call's bounds -------------------------------------------------------------------

  /** The body and the server-side slack (a wait) of one attempt. */
  static final class Attempt {
    final byte[] body;
    final long slack;

    Attempt(byte[] body, long slack) {
      this.body = body;
      this.slack = slack;
    }
  }

  /** One call's bounds: a deadline for it and its retries, and the token that ends it early. */
  static final class Call {
    final long deadline;
    final Cancel cancel;
    boolean repeatSafe = true; // may be sent again after an unknown outcome (docs/client.md)
    long slack; // how long the server may legitimately hold the request (a wait)
    Supplier<Attempt> beforeAttempt; // a waiting acquire asks only for what is left of its wait

    Call(long deadline, Cancel cancel) {
      this.deadline = deadline;
      this.cancel = cancel;
    }
  }

  Call callFor(long budget, Cancel cancel) {
    return new Call(System.nanoTime() + budget, cancel);
  }

  Call callFor() {
    return callFor(retryBudget, null);
  }

  /** An answer and the send time of the request it answers. */
  static final class Exchange {
    final int status;
    final byte[] body;
    final long sentAt;

    Exchange(int status, byte[] body, long sentAt) {
      this.status = status;
      this.body = body;
      this.sentAt = sentAt;
    }

    Map<String, Object> json(String what) {
      try {
        return Json.parseObject(new String(body, StandardCharsets.UTF_8));
      } catch (IllegalArgumentException bad) {
        throw new DlockException.Internal(
            what + ": the server's answer is not a JSON object", status);
      }
    }
  }

  // --- one request to one server ---------------------------------------------------------

  private enum Failure {
    NOT_SENT, // could not connect: the request never left
    MAYBE_SENT, // lost after the request was written: the outcome is unknown
    TLS // handshake refused: configuration, not an outage
  }

  private static final class TransportError extends Exception {
    private static final long serialVersionUID = 1L;
    final Failure kind;
    final boolean timedOut;

    TransportError(Failure kind, String message) {
      this(kind, message, false);
    }

    TransportError(Failure kind, String message, boolean timedOut) {
      super(message);
      this.kind = kind;
      this.timedOut = timedOut;
    }
  }

  private HttpResponse<byte[]> send(
      String base, String method, String target, byte[] body, String bearer, long timeout,
      Cancel cancel, String what)
      throws TransportError {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create(base + target)).timeout(Duration.ofNanos(timeout));
    if (!bearer.isEmpty()) {
      request.header("Authorization", "Bearer " + bearer);
    }
    if (body != null) {
      request.header("Content-Type", "application/json");
      request.method(method, HttpRequest.BodyPublishers.ofByteArray(body));
    } else {
      request.method(method, HttpRequest.BodyPublishers.noBody());
    }
    CompletableFuture<HttpResponse<byte[]>> future =
        http.sendAsync(request.build(), HttpResponse.BodyHandlers.ofByteArray());
    if (cancel != null) {
      cancel.attach(future);
    }
    try {
      return future.get();
    } catch (CancellationException cancelled) {
      throw new DlockException.Cancelled(what + ": cancelled");
    } catch (InterruptedException interrupted) {
      future.cancel(true);
      Thread.currentThread().interrupt();
      throw new DlockException.Cancelled(what + ": interrupted");
    } catch (ExecutionException failed) {
      if (cancel != null && cancel.isCancelled()) {
        throw new DlockException.Cancelled(what + ": cancelled");
      }
      TransportError error = classify(base, failed.getCause());
      if (error.kind == Failure.MAYBE_SENT && !error.timedOut && refusesOurHandshake(base)) {
        throw new TransportError(
            Failure.TLS, "TLS with " + base + ": the server refused this client's handshake");
      }
      throw error;
    } finally {
      if (cancel != null) {
        cancel.detach();
      }
    }
  }

  private static TransportError classify(String base, Throwable error) {
    for (Throwable e = error; e != null; e = e.getCause()) {
      if (e instanceof SSLException) {
        return new TransportError(Failure.TLS, "TLS with " + base + ": " + e.getMessage());
      }
    }
    for (Throwable e = error; e != null; e = e.getCause()) {
      if (e instanceof ConnectException) {
        return new TransportError(Failure.NOT_SENT, base + ": cannot connect: " + describe(e));
      }
      if (e instanceof HttpTimeoutException) {
        return new TransportError(Failure.MAYBE_SENT, base + ": no answer in time", true);
      }
    }
    return new TransportError(Failure.MAYBE_SENT, base + ": " + describe(error));
  }

  /**
   * Whether the https server at base refuses this client's TLS handshake. Under TLS 1.3 a server
   * that requires a client certificate sends its alert after the client's handshake is done, so
   * the alert races the request: the JDK's HttpClient sometimes reports only a connection closed
   * with no byte read, which would read as an unknown outcome. One probe with the same context
   * tells the two apart: it writes a request and reads; an SSLException is the refusal.
   */
  private boolean refusesOurHandshake(String base) {
    if (tls == null || !base.toLowerCase(Locale.ROOT).startsWith("https://")) {
      return false;
    }
    URI uri = URI.create(base);
    int port = uri.getPort() == -1 ? 443 : uri.getPort();
    try (SSLSocket socket = (SSLSocket) tls.getSocketFactory().createSocket()) {
      int timeout = (int) Math.max(1, Math.min(requestTimeout / 1_000_000L, 2_000L));
      socket.connect(new java.net.InetSocketAddress(uri.getHost(), port), timeout);
      socket.setSoTimeout(timeout);
      socket.setSSLParameters(tlsParameters);
      socket.startHandshake();
      String probe =
          "GET /healthz HTTP/1.1\r\nHost: " + uri.getHost() + "\r\nConnection: close\r\n\r\n";
      socket.getOutputStream().write(probe.getBytes(StandardCharsets.US_ASCII));
      socket.getOutputStream().flush();
      socket.getInputStream().read();
      return false;
    } catch (SSLException refused) {
      return true;
    } catch (IOException | RuntimeException other) {
      return false;
    }
  }

  private static String describe(Throwable e) {
    String message = e.getMessage();
    return message == null || message.isEmpty() ? e.getClass().getSimpleName() : message;
  }

  // --- the retry loop ----------------------------------------------------------------------

  /**
   * Sends the request, retrying transient failures (unreachable, 429/502/503/504) with back-off
   * until the call's deadline; returns the first other answer, whatever its status. An
   * unreachable server, a 502/503/504 or a lost connection hands the call to the next server at
   * once (until each was tried; then back-off). A lost connection ends a call that is not
   * repeat-safe with UnknownOutcome at once.
   */
  Exchange call(String method, String target, Map<String, Object> json, String what, Call call,
      String authorization) {
    String bearer = authorization != null && !authorization.isEmpty() ? authorization : token;
    byte[] body = json == null ? null : Json.write(json).getBytes(StandardCharsets.UTF_8);
    long started = System.nanoTime();
    Object failure = null; // a DlockException or a TransportError
    int failedInRound = 0;
    int backoffRound = 0;
    int attempts = 0;
    int count = servers.size();
    while (true) {
      attempts++;
      long slack = call.slack;
      if (call.beforeAttempt != null) {
        Attempt attempt = call.beforeAttempt.get();
        body = attempt.body;
        slack = attempt.slack;
      }
      long sentAt = System.nanoTime();
      // Every call gets at least one real attempt, even with its deadline already due.
      long timeout = Math.min(Math.max(call.deadline - sentAt, 1_000_000L), requestTimeout + slack);
      int server;
      synchronized (this) {
        server = current % count;
      }
      long retryAfter = 0;
      boolean moveOn;
      try {
        HttpResponse<byte[]> response =
            send(servers.get(server), method, target, body, bearer, timeout, call.cancel, what);
        int status = response.statusCode();
        if (status != 429 && status != 502 && status != 503 && status != 504) {
          return new Exchange(status, response.body(), sentAt);
        }
        failure = DlockException.fromResponse(status, response.body(), what, "");
        retryAfter = retryAfterNanos(response);
        moveOn = status != 429; // 429 is this server's own limit: stay
      } catch (TransportError error) {
        // An attempt cut short by the call's own deadline says nothing new about the server:
        // the earlier failure (a 429, a 503) is the one to report.
        boolean cutShort = error.timedOut && timeout < requestTimeout + slack;
        if (failure == null || !cutShort) {
          failure = error;
        }
        moveOn = true;
        if (error.kind == Failure.MAYBE_SENT && !call.repeatSafe) {
          throw giveUp(failure, what, attempts, started);
        }
        if (error.kind == Failure.TLS && count == 1) {
          throw giveUp(failure, what, attempts, started);
        }
      }
      long now = System.nanoTime();
      if (moveOn && count > 1) {
        synchronized (this) {
          if (current % count == server) { // only the first thread moves on
            current = (server + 1) % count;
          }
        }
        failedInRound++;
        if (failedInRound < count) {
          if (now - call.deadline >= 0) {
            throw giveUp(failure, what, attempts, started);
          }
          continue;
        }
        failedInRound = 0;
        if (failure instanceof TransportError && ((TransportError) failure).kind == Failure.TLS) {
          throw giveUp(failure, what, attempts, started);
        }
      }
      double fraction;
      synchronized (random) {
        fraction = random.nextDouble();
      }
      long delay = Lease.backoffNanos(backoffInitial, backoffMax, backoffRound++, fraction);
      delay = Math.max(delay, retryAfter);
      if (now + delay - call.deadline >= 0) {
        throw giveUp(failure, what, attempts, started);
      }
      Cancel.pause(call.cancel, delay, what);
    }
  }

  private static long retryAfterNanos(HttpResponse<byte[]> response) {
    String value = response.headers().firstValue("Retry-After").orElse("").strip();
    if (value.matches("\\d{1,6}")) {
      return Long.parseLong(value) * 1_000_000_000L;
    }
    return 0;
  }

  private static DlockException giveUp(Object failure, String what, int attempts, long started) {
    double spent = (System.nanoTime() - started) / 1e9;
    String suffix =
        String.format(
            " (gave up after %d attempt%s in %.1f s)", attempts, attempts == 1 ? "" : "s", spent);
    if (failure instanceof DlockException) {
      DlockException error = (DlockException) failure;
      String message = error.getMessage() + suffix;
      if (error instanceof DlockException.NotLeader) {
        return new DlockException.NotLeader(message, error.status());
      }
      if (error instanceof DlockException.ResourceExhausted) {
        return new DlockException.ResourceExhausted(message, error.status());
      }
      return new DlockException.Unavailable(message, error.status());
    }
    TransportError error = (TransportError) failure;
    String message = what + ": " + error.getMessage() + suffix;
    switch (error.kind) {
      case TLS:
        return new DlockException.Tls(message);
      case MAYBE_SENT:
        return new DlockException.UnknownOutcome(message);
      default:
        return new DlockException.Unavailable(message, 0);
    }
  }

  void expect(Exchange exchange, int status, String what, String key) {
    if (exchange.status != status) {
      throw DlockException.fromResponse(exchange.status, exchange.body, what, key);
    }
  }

  // --- routes ------------------------------------------------------------------------------

  Exchange openSession(String owner, long ttlMs, long lockDelayMs, Call call) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("owner", owner);
    if (ttlMs > 0) {
      body.put("ttl_ms", ttlMs);
    }
    if (lockDelayMs > 0) {
      body.put("lock_delay_ms", lockDelayMs);
    }
    call.repeatSafe = false; // a repeat would open a second session
    Exchange exchange = call("POST", "/v1/sessions", body, "open session", call, null);
    expect(exchange, 201, "open session", "");
    return exchange;
  }

  Exchange keepalive(String sessionId, Call call) {
    String what = "keepalive session " + sessionId;
    Exchange exchange =
        call("POST", "/v1/sessions/" + quote(sessionId) + "/keepalive", null, what, call, null);
    expect(exchange, 200, what, "");
    return exchange;
  }

  void closeSession(String sessionId, Call call) {
    String what = "close session " + sessionId;
    Exchange exchange = call("DELETE", "/v1/sessions/" + quote(sessionId), null, what, call, null);
    expect(exchange, 204, what, "");
  }

  /** What an acquire asks for; {@code leaderValue} non-null: a campaign. */
  static final class Ask {
    String key;
    String sessionId;
    long ttlMs;
    boolean sessionBound;
    long waitMs;
    String ns;
    LockOptions.Mode mode = LockOptions.Mode.EXCLUSIVE;
    int limit;
    String leaderValue;
  }

  /** The grant's answer and its send time; throws Held when still held after the wait. */
  Exchange acquire(Ask ask, Call call) {
    boolean campaign = ask.leaderValue != null;
    String what = (campaign ? "campaign " : "acquire ") + ask.key;
    String target;
    if (campaign) {
      target = "/v1/elections/" + quote(ask.key) + "/campaign";
    } else if (ask.mode == LockOptions.Mode.PERMIT) {
      target = "/v1/semaphores/" + quote(ask.key) + "/acquire";
    } else {
      target = "/v1/locks/" + quote(ask.key) + "/acquire";
    }
    target += query("ns", ns(ask.ns));
    long waitUntil = System.nanoTime() + ask.waitMs * 1_000_000L;
    long[] askedWait = {0};
    call.beforeAttempt =
        () -> {
          // Recomputed before every attempt: retries after a 503 never wait past our deadline.
          askedWait[0] = Math.max(0, (waitUntil - System.nanoTime()) / 1_000_000L);
          Map<String, Object> body = new LinkedHashMap<>();
          body.put("session_id", ask.sessionId);
          if (campaign) {
            body.put("value", ask.leaderValue);
          } else {
            if (ask.sessionBound) {
              body.put("lease", "session");
            }
            if (ask.ttlMs > 0) {
              body.put("ttl_ms", ask.ttlMs);
            }
            if (ask.mode == LockOptions.Mode.SHARED) {
              body.put("mode", "shared");
            }
            if (ask.mode == LockOptions.Mode.PERMIT) {
              body.put("limit", (long) ask.limit);
            }
          }
          if (askedWait[0] > 0) {
            body.put("wait_ms", askedWait[0]);
          }
          return new Attempt(
              Json.write(body).getBytes(StandardCharsets.UTF_8), askedWait[0] * 1_000_000L);
        };
    int round = 0;
    while (true) {
      Exchange exchange = call("POST", target, null, what, call, null);
      if (exchange.status == 200) {
        return exchange;
      }
      Map<String, Object> error = DlockException.errorObject(exchange.body);
      if (exchange.status != 409 || !"held".equals(Json.str(error, "code", ""))) {
        throw DlockException.fromResponse(exchange.status, exchange.body, what, ask.key);
      }
      // Held. The server may cap the wait below ours: keep asking until ours is spent.
      long left = waitUntil - System.nanoTime();
      if (left <= 20_000_000L) {
        throw new DlockException.Held(
            ask.key, ask.waitMs / 1000.0, Json.str(error, "delayed_until", null));
      }
      if (System.nanoTime() - exchange.sentAt < askedWait[0] * 500_000L) {
        // Answered early without waiting: pace the retries instead of spinning.
        double fraction;
        synchronized (random) {
          fraction = random.nextDouble();
        }
        long pause =
            Math.min(left, Lease.backoffNanos(backoffInitial, backoffMax, round++, fraction));
        Cancel.pause(call.cancel, pause, what);
      }
    }
  }

  Exchange extend(String key, String sessionId, long token, long ttlMs, String ns,
      LockOptions.Mode mode, Call call) {
    String what = "extend " + key;
    String collection = mode == LockOptions.Mode.PERMIT ? "semaphores" : "locks";
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("session_id", sessionId);
    body.put("fencing_token", token);
    if (ttlMs > 0) {
      body.put("ttl_ms", ttlMs);
    }
    String target = "/v1/" + collection + "/" + quote(key) + "/extend" + query("ns", ns(ns));
    Exchange exchange = call("POST", target, body, what, call, null);
    expect(exchange, 200, what, key);
    long answered = Json.num(exchange.json(what), "fencing_token", -1);
    if (answered != token) {
      // Extend never changes the token: another one means another grant.
      throw new DlockException.LockLost(
          what + ": the server answered token " + answered + ", ours is " + token, 200);
    }
    return exchange;
  }

  void release(String key, String sessionId, long token, String ns, LockOptions.Mode mode,
      Call call) {
    String what = "release " + key;
    String collection = mode == LockOptions.Mode.PERMIT ? "semaphores" : "locks";
    String target =
        "/v1/" + collection + "/" + quote(key)
            + query("session_id", sessionId, "fencing_token", token, "ns", ns(ns));
    expect(call("DELETE", target, null, what, call, null), 204, what, key);
  }

  /** GET {@code path}: its object, or null on 404 with {@code noneCode}. */
  Map<String, Object> get(String path, String what, Call call, String noneCode) {
    Exchange exchange = call("GET", path, null, what, call, null);
    if (exchange.status == 404
        && noneCode.equals(Json.str(DlockException.errorObject(exchange.body), "code", ""))) {
      return null;
    }
    expect(exchange, 200, what, "");
    return exchange.json(what);
  }

  void proclaim(String name, String sessionId, long token, String value, String ns, Call call) {
    String what = "proclaim " + name;
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("session_id", sessionId);
    body.put("fencing_token", token);
    body.put("value", value);
    String target = "/v1/elections/" + quote(name) + "/proclaim" + query("ns", ns(ns));
    Exchange exchange = call("POST", target, body, what, call, null);
    expect(exchange, 200, what, name);
    if (Json.num(exchange.json(what), "fencing_token", -1) != token) {
      throw new DlockException.LockLost(what + ": the server answered another token", 200);
    }
  }

  void resign(String name, String sessionId, long token, String ns, Call call) {
    String what = "resign " + name;
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("session_id", sessionId);
    body.put("fencing_token", token);
    String target = "/v1/elections/" + quote(name) + "/resign" + query("ns", ns(ns));
    expect(call("POST", target, body, what, call, null), 204, what, name);
  }

  boolean clearDelay(String key, String ns, Call call) {
    String what = "clear the lock-delay of " + key;
    call.repeatSafe = false; // a repeat could end a delay that started after the first
    String target = "/v1/admin/locks/" + quote(key) + "/clear-delay" + query("ns", ns(ns));
    Exchange exchange = call("POST", target, null, what, call, adminToken);
    expect(exchange, 200, what, key);
    return Boolean.TRUE.equals(exchange.json(what).get("cleared"));
  }

  Map<String, Object> revoke(String key, String ns, Call call) {
    String what = "revoke " + key;
    call.repeatSafe = false; // a repeat could revoke a grant made after the first revoke
    String target = "/v1/admin/locks/" + quote(key) + "/revoke" + query("ns", ns(ns));
    Exchange exchange = call("POST", target, null, what, call, adminToken);
    expect(exchange, 200, what, key);
    return exchange.json(what);
  }
}
