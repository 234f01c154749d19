package dev.dlock;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Executes one scenario of tests/clients/scenarios.json with the Java client (the format is
 * tests/clients/README.md), through the client's public API.
 */
final class ScenarioRun {
  static final Map<String, Class<?>> ERRORS =
      Map.ofEntries(
          Map.entry("held", DlockException.Held.class),
          Map.entry("lock_lost", DlockException.LockLost.class),
          Map.entry("session_not_found", DlockException.SessionNotFound.class),
          Map.entry("unavailable", DlockException.Unavailable.class), // and its two kinds
          Map.entry("not_leader", DlockException.NotLeader.class),
          Map.entry("unknown_outcome", DlockException.UnknownOutcome.class),
          Map.entry("unauthenticated", DlockException.Unauthenticated.class),
          Map.entry("permission_denied", DlockException.PermissionDenied.class),
          Map.entry("conflict", DlockException.Conflict.class),
          Map.entry("invalid_argument", DlockException.InvalidArgument.class),
          Map.entry("too_many_requests", DlockException.ResourceExhausted.class),
          Map.entry("cancelled", DlockException.Cancelled.class),
          Map.entry("tls", DlockException.Tls.class));
  static final String BOGUS_TOKEN = "dlk_" + "A".repeat(43); // well-formed, known to no server

  /** What a step did: its value (a Lock, a LeaderInfo, null for held/none) or its error. */
  static final class Outcome {
    final Object value;
    final Throwable error;
    final double elapsed;

    Outcome(Object value, Throwable error, double elapsed) {
      this.value = value;
      this.error = error;
      this.elapsed = elapsed;
    }
  }

  /** A step run in the background: a future of the client's async API. */
  static final class Task {
    final Map<String, Object> step;
    final CompletableFuture<?> future;
    final long started = System.nanoTime();
    volatile double elapsed = -1;

    Task(Map<String, Object> step, CompletableFuture<?> future) {
      this.step = step;
      this.future = future;
      future.whenComplete((v, e) -> elapsed = (System.nanoTime() - started) / 1e9);
    }

    boolean waitFor(double seconds) {
      try {
        future.get((long) (seconds * 1000), TimeUnit.MILLISECONDS);
      } catch (TimeoutException stillRunning) {
        return false;
      } catch (InterruptedException | ExecutionException | CancellationException ended) {
        // ended: outcome() tells how
      }
      return true;
    }

    Outcome outcome() {
      double took = elapsed >= 0 ? elapsed : (System.nanoTime() - started) / 1e9;
      try {
        return new Outcome(unwrap(future.getNow(null)), null, took);
      } catch (CancellationException cancelled) {
        return new Outcome(null, cancelled, took);
      } catch (java.util.concurrent.CompletionException failed) {
        return new Outcome(null, failed.getCause(), took);
      }
    }
  }

  interface Action {
    Object run();
  }

  private final Harness harness;
  private final Map<String, Object> scenario;
  private final Path tmp;
  final String ns;
  private final Map<String, Object> names = new HashMap<>();
  private final Map<String, Long> started = new HashMap<>();
  private final Map<String, Task> tasks = new HashMap<>();
  private final List<Session> sessions = new ArrayList<>();

  ScenarioRun(Harness harness, Map<String, Object> scenario, Path tmp) {
    this.harness = harness;
    this.scenario = scenario;
    this.tmp = tmp;
    String name = (String) scenario.get("name");
    byte[] random = new byte[4];
    new SecureRandom().nextBytes(random);
    // Every key of this run lives in a namespace of its own: scenarios share the servers.
    ns = name.substring(0, Math.min(40, name.length())) + "-" + HexFormat.of().formatHex(random);
  }

  @SuppressWarnings("unchecked")
  void run() throws Exception {
    int number = 0;
    for (Object item : (List<Object>) scenario.get("steps")) {
      Map<String, Object> step = (Map<String, Object>) item;
      number++;
      try {
        step(step);
      } catch (AssertionError failure) {
        throw new AssertionError("step " + number + " " + Json.write(step) + ": "
            + failure.getMessage(), failure);
      }
    }
  }

  void close() {
    for (Task task : tasks.values()) {
      task.future.cancel(true);
    }
    for (Session session : sessions) {
      try {
        session.close();
      } catch (DlockException ignored) {
        // a scenario may leave a session lost
      }
    }
  }

  // --- arguments ---------------------------------------------------------------------------

  static Duration duration(Object value) {
    if (value == null) {
      return null;
    }
    if (value instanceof Number) {
      return Duration.ofMillis(Math.round(((Number) value).doubleValue() * 1000));
    }
    return Lease.parseDuration((String) value, "duration");
  }

  static double seconds(Object value) {
    return duration(value).toMillis() / 1000.0;
  }

  private static String str(Map<String, Object> step, String name, String fallback) {
    return Json.str(step, name, fallback);
  }

  private static boolean flag(Map<String, Object> step, String name, boolean fallback) {
    Object v = step.get(name);
    return v instanceof Boolean ? (Boolean) v : fallback;
  }

  static Object unwrap(Object value) {
    if (value instanceof Optional) {
      return ((Optional<?>) value).orElse(null);
    }
    return value;
  }

  private static long tokenOf(Object value) {
    if (value instanceof Lock) {
      return ((Lock) value).token();
    }
    if (value instanceof LeaderInfo) {
      return ((LeaderInfo) value).fencingToken();
    }
    throw new AssertionError("no token in " + value);
  }

  // --- outcomes ----------------------------------------------------------------------------

  @SuppressWarnings("unchecked")
  private void expect(Map<String, Object> step, Outcome outcome, Map<String, Object> fallback) {
    Map<String, Object> want =
        step.containsKey("expect") ? (Map<String, Object>) step.get("expect") : fallback;
    Throwable error = outcome.error;
    if (want.containsKey("error")) {
      String kind = (String) want.get("error");
      boolean matches =
          ERRORS.get(kind).isInstance(error)
              || (kind.equals("cancelled") && error instanceof CancellationException);
      if (!matches) {
        throw new AssertionError("expected error " + kind + ", got "
            + (error != null ? error : outcome.value), error);
      }
      if (want.containsKey("field")) {
        Optional<String> field = ((DlockException) error).field();
        if (!field.equals(Optional.of(want.get("field")))) {
          throw new AssertionError("field " + field);
        }
      }
      if (flag(want, "delayed", false)
          && ((DlockException.Held) error).delayedUntil().isEmpty()) {
        throw new AssertionError("no lock-delay named: " + error);
      }
      for (Object text : (List<Object>) want.getOrDefault("message_excludes", List.of())) {
        if (error.getMessage().contains((String) text)) {
          throw new AssertionError("the message names " + text + ": " + error);
        }
      }
    } else if (error != null) {
      throw new AssertionError("expected " + want + ", got error " + error, error);
    }
    Object value = outcome.value;
    if (flag(want, "granted", false) && value == null) {
      throw new AssertionError("expected a grant, got held");
    }
    if ((flag(want, "held", false) || flag(want, "none", false)) && value != null) {
      throw new AssertionError("expected none/held, got " + value);
    }
    if (want.containsKey("after_at_least")) {
      double least = seconds(want.get("after_at_least"));
      if (outcome.elapsed < least) {
        throw new AssertionError("answered after " + outcome.elapsed + " s < " + least + " s");
      }
    }
    for (Object name : (List<Object>) want.getOrDefault("token_greater_than", List.of())) {
      long other = tokenOf(names.get(name));
      if (tokenOf(value) <= other) {
        throw new AssertionError("token " + tokenOf(value) + " not greater than " + name + "'s "
            + other);
      }
    }
    if (want.containsKey("token_of")) {
      long wanted = tokenOf(names.get(want.get("token_of")));
      if (tokenOf(value) != wanted) {
        throw new AssertionError("token " + tokenOf(value) + ", not " + wanted);
      }
    }
    if (want.containsKey("cleared") && !want.get("cleared").equals(value)) {
      throw new AssertionError("cleared " + value);
    }
    if (want.containsKey("value")) {
      String got =
          value instanceof LeaderInfo ? ((LeaderInfo) value).value()
              : value instanceof Leadership ? ((Leadership) value).value() : null;
      if (!want.get("value").equals(got)) {
        throw new AssertionError("value " + got);
      }
    }
  }

  /** Runs {@code action} now and checks its outcome, binding its value under "as". */
  private void outcomeOf(Map<String, Object> step, Action action, Map<String, Object> fallback) {
    long start = System.nanoTime();
    Outcome outcome;
    try {
      outcome = new Outcome(unwrap(action.run()), null, (System.nanoTime() - start) / 1e9);
    } catch (DlockException error) {
      outcome = new Outcome(null, error, (System.nanoTime() - start) / 1e9);
    }
    expect(step, outcome, fallback);
    if (step.containsKey("as") && outcome.value != null) {
      names.put((String) step.get("as"), outcome.value);
    }
  }

  private static final Map<String, Object> GRANTED = Map.of("granted", true);

  // --- steps -------------------------------------------------------------------------------

  @SuppressWarnings("unchecked")
  private void step(Map<String, Object> step) throws Exception {
    String kind = (String) step.get("do");
    switch (kind) {
      case "client":
        client(step);
        break;
      case "session": {
        Client client = (Client) names.get(step.get("client"));
        outcomeOf(step, () -> {
          Session session = client.session(str(step, "owner", null), duration(step.get("ttl")),
              duration(step.get("lock_delay")), null);
          sessions.add(session);
          return session;
        }, Map.of());
        break;
      }
      case "acquire":
        acquire(step);
        break;
      case "campaign": {
        Session session = (Session) names.get(step.get("session"));
        String name = (String) step.get("name");
        String value = (String) step.get("value");
        Duration wait = Optional.ofNullable(duration(step.get("wait"))).orElse(Duration.ZERO);
        if (flag(step, "background", false)) {
          tasks.put(
              (String) step.get("as"), new Task(step, session.campaignAsync(name, value, wait)));
        } else {
          outcomeOf(step, () -> session.campaign(name, value, wait), GRANTED);
        }
        break;
      }
      case "observe": {
        Client client = (Client) names.get(step.get("client"));
        Leadership after = (Leadership) names.get(step.get("after"));
        Duration wait =
            Optional.ofNullable(duration(step.get("wait"))).orElse(Duration.ofSeconds(10));
        String name = (String) step.get("name");
        if (flag(step, "background", false)) {
          tasks.put((String) step.get("as"),
              new Task(step, client.observeAsync(name, after.token(), after.value(), wait)));
        } else {
          outcomeOf(step, () -> client.observe(name, after.token(), after.value(), wait), Map.of());
        }
        break;
      }
      case "leader": {
        Client client = (Client) names.get(step.get("client"));
        outcomeOf(step, () -> client.leader((String) step.get("name")), Map.of());
        break;
      }
      case "proclaim": {
        Leadership leader = (Leadership) names.get(step.get("leader"));
        outcomeOf(step, () -> {
          leader.proclaim((String) step.get("value"));
          return null;
        }, Map.of());
        break;
      }
      case "resign": {
        Leadership leader = (Leadership) names.get(step.get("leader"));
        outcomeOf(step, () -> {
          leader.resign();
          return null;
        }, Map.of());
        break;
      }
      case "release": {
        Lock lock = (Lock) names.get(step.get("lock"));
        outcomeOf(step, () -> {
          lock.release();
          return null;
        }, Map.of());
        break;
      }
      case "revoke": {
        Client client = (Client) names.get(step.get("client"));
        outcomeOf(step, () -> client.revoke((String) step.get("key")), Map.of());
        break;
      }
      case "clear_delay": {
        Client client = (Client) names.get(step.get("client"));
        outcomeOf(step, () -> client.clearDelay((String) step.get("key")), Map.of());
        break;
      }
      case "close": {
        Session session = (Session) names.get(step.get("session"));
        outcomeOf(step, () -> {
          session.close();
          return null;
        }, Map.of());
        break;
      }
      case "await": {
        Task task = tasks.get(step.get("task"));
        double within = seconds(step.get("within"));
        if (!task.waitFor(within)) {
          throw new AssertionError(step.get("task") + " still pending after " + within + " s");
        }
        String was = (String) task.step.get("do");
        Outcome outcome = task.outcome();
        expect(step, outcome,
            was.equals("acquire") || was.equals("campaign") ? GRANTED : Map.of());
        if (outcome.value != null) {
          names.put((String) step.get("task"), outcome.value);
        }
        break;
      }
      case "pending": {
        Task task = tasks.get(step.get("task"));
        if (task.waitFor(seconds(step.get("for")))) {
          Outcome outcome = task.outcome();
          throw new AssertionError(step.get("task") + " finished early: " + outcome.value + " "
              + outcome.error, outcome.error);
        }
        break;
      }
      case "cancel":
        tasks.get(step.get("task")).future.cancel(true);
        break;
      case "read":
        read(step);
        break;
      case "semaphore": {
        Client client = (Client) names.get(step.get("client"));
        SemaphoreInfo info = client.semaphore((String) step.get("name"));
        Map<String, Object> want = (Map<String, Object>) step.get("expect");
        if (want.containsKey("limit") && info.limit() != (Long) want.get("limit")) {
          throw new AssertionError("limit " + info.limit());
        }
        if (want.containsKey("holders") && info.holders().size() != (Long) want.get("holders")) {
          throw new AssertionError("holders " + info.holders());
        }
        break;
      }
      case "hold": {
        Lock lock = (Lock) names.get(step.get("lock"));
        long end = System.nanoTime() + (long) (seconds(step.get("for")) * 1e9);
        while (System.nanoTime() - end < 0) {
          if (!lock.isValid() || lock.isLost()) {
            throw new AssertionError("lost while held: " + lock.lostReason());
          }
          Thread.sleep(50);
        }
        lock.check();
        break;
      }
      case "lost": {
        Lock lock = (Lock) names.get(step.get("lock"));
        double within = seconds(step.get("within"));
        try {
          lock.lost().get((long) (within * 1000), TimeUnit.MILLISECONDS);
        } catch (TimeoutException none) {
          throw new AssertionError("no lost signal within " + within + " s");
        }
        if (lock.isValid()) {
          throw new AssertionError("lost but still valid");
        }
        try {
          lock.check();
        } catch (DlockException.LockLost expected) {
          break;
        }
        throw new AssertionError("check() did not throw LockLost");
      }
      case "deadline": {
        Lock lock = (Lock) names.get(step.get("lock"));
        double trusted = (lock.deadlineNanos() - started.get((String) step.get("lock"))) / 1e9;
        double low = seconds(step.get("at_least"));
        double high = seconds(step.get("at_most"));
        if (trusted < low || trusted > high) {
          throw new AssertionError(
              "trusted for " + trusted + " s, not in [" + low + ", " + high + "]");
        }
        break;
      }
      case "server": {
        Object server = step.get("server");
        String line = (step.get("command") + " " + (server == null ? "" : server)).strip();
        harness.command(line);
        break;
      }
      default:
        throw new AssertionError("unknown step " + kind);
    }
  }

  private void client(Map<String, Object> step) throws IOException {
    String which = str(step, "servers", "first");
    List<String> servers;
    switch (which) {
      case "first":
        servers = harness.servers.subList(0, 1);
        break;
      case "all":
        servers = harness.servers;
        break;
      case "auth":
        servers = List.of(harness.authServer);
        break;
      default:
        servers = List.of(harness.tlsServer);
    }
    // The runner's environment: the DLOCK_* variables a step asks for, and no other (the
    // developer's shell must not leak in).
    Map<String, String> env = new HashMap<>();
    Client.Builder builder =
        Client.builder()
            .servers(servers.toArray(new String[0]))
            .namespace(ns)
            .retryBudget(duration(step.getOrDefault("retry_budget", "5s")))
            .requestTimeout(Duration.ofSeconds(5))
            .backoff(Duration.ofMillis(50), Duration.ofMillis(500));
    Map<String, Object> tls = Json.obj(step, "tls");
    if (!tls.isEmpty()) {
      String ca = (String) harness.tlsFiles.get(tls.get("ca"));
      boolean withCert = flag(tls, "client_cert", false);
      String cert = withCert ? (String) harness.tlsFiles.get("client_cert") : null;
      String key = withCert ? (String) harness.tlsFiles.get("client_key") : null;
      if (str(tls, "source", "option").equals("option")) {
        builder.caFile(ca).clientCertificate(cert, key);
      } else {
        env.put("DLOCK_CACERT", ca);
        if (withCert) {
          env.put("DLOCK_CERT", cert);
          env.put("DLOCK_KEY", key);
        }
      }
    }
    if (step.get("clock_drift") instanceof Number) {
      builder.clockDrift(((Number) step.get("clock_drift")).doubleValue());
    }
    if ("admin".equals(step.get("admin_token"))) {
      builder.adminToken(harness.adminToken);
    }
    String token = str(step, "token", null);
    if (token != null) {
      token = token.equals("bogus") ? BOGUS_TOKEN : (String) harness.tokens.get(token);
      String source = str(step, "token_source", "option");
      Path file = tmp.resolve("token-" + step.get("as"));
      switch (source) {
        case "option":
          builder.token(token);
          break;
        case "file":
          Files.writeString(file, token + "\n");
          builder.tokenFile(file.toString());
          break;
        case "env":
          env.put("DLOCK_TOKEN", token);
          break;
        default: // env_file
          Files.writeString(file, token + "\n");
          env.put("DLOCK_TOKEN_FILE", file.toString());
      }
    }
    names.put((String) step.get("as"), builder.environment(env).build());
  }

  private void acquire(Map<String, Object> step) {
    Session session = (Session) names.get(step.get("session"));
    String key = (String) step.get("key");
    LockOptions options =
        LockOptions.defaults()
            .withTtl(duration(step.get("ttl")))
            .waitUpTo(Optional.ofNullable(duration(step.get("wait"))).orElse(Duration.ZERO))
            .autoExtend(flag(step, "auto_extend", true));
    if ("shared".equals(step.get("mode"))) {
      options = options.shared();
    }
    if (step.get("permits") instanceof Long && (Long) step.get("permits") > 0) {
      options = options.permits(((Long) step.get("permits")).intValue());
    }
    if (flag(step, "session_bound", false)) {
      options = options.sessionBound();
    }
    if (step.containsKey("as")) {
      started.put((String) step.get("as"), System.nanoTime());
    }
    LockOptions chosen = options;
    boolean withForm = "with".equals(step.get("form"));
    if (flag(step, "background", false)) {
      CompletableFuture<?> future =
          withForm
              ? session.acquireAsync(key, chosen).thenApply(
                  granted -> granted.orElseThrow(() -> new DlockException.Held(key, 0, null)))
              : session.acquireAsync(key, chosen);
      tasks.put((String) step.get("as"), new Task(step, future));
      return;
    }
    if (withForm) {
      outcomeOf(step, () -> {
        try (Lock lock = session.lock(key, chosen)) {
          return lock;
        }
      }, GRANTED);
    } else {
      outcomeOf(step, () -> session.acquire(key, chosen), GRANTED);
    }
  }

  @SuppressWarnings("unchecked")
  private void read(Map<String, Object> step) throws InterruptedException {
    Client client = (Client) names.get(step.get("client"));
    Map<String, Object> want = (Map<String, Object>) step.getOrDefault("expect", Map.of());
    long end = System.nanoTime() + (long) (seconds(step.getOrDefault("within", 0L)) * 1e9);
    while (true) {
      String problem = null;
      try {
        List<LockInfo> holders = client.holders((String) step.get("key"));
        if (flag(want, "free", false) && !holders.isEmpty()) {
          problem = "held by token " + holders.get(0).fencingToken();
        }
        if (want.containsKey("holders") && holders.size() != (Long) want.get("holders")) {
          problem = holders.size() + " holders";
        }
        if (want.containsKey("token_of")) {
          long token = tokenOf(names.get(want.get("token_of")));
          if (holders.stream().noneMatch(h -> h.fencingToken() == token)) {
            problem = "tokens " + holders + ", not " + token;
          }
        }
      } catch (DlockException error) {
        problem = error.toString();
      }
      if (problem == null) {
        return;
      }
      if (System.nanoTime() - end >= 0) {
        throw new AssertionError(problem);
      }
      Thread.sleep(50);
    }
  }
}
