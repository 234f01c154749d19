package dev.dlock;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * The entry point: talks to one or several dlockd sharing one backend. Thread-safe; share one per
 * process (the Java peer of include/dlock/client.h).
 *
 * <pre>{@code
 * Client client = Client.builder().servers("http://127.0.0.1:7070").build();
 * try (Lock lock = client.lock("payouts/batch-17", Duration.ofSeconds(10))) {
 *   lock.check();                       // throws DlockException.LockLost once not trusted
 *   ledger.write(payout, lock.token()); // the resource refuses smaller tokens
 * }
 * }</pre>
 *
 * Every option has the environment fallback the {@code dlock} CLI has: servers DLOCK_SERVER,
 * token DLOCK_TOKEN, tokenFile DLOCK_TOKEN_FILE, adminToken DLOCK_ADMIN_TOKEN, caFile
 * DLOCK_CACERT, certFile/keyFile DLOCK_CERT/DLOCK_KEY (mTLS), clockDrift DLOCK_CLOCK_DRIFT
 * (default 1 %), namespace DLOCK_NAMESPACE.
 */
public final class Client implements AutoCloseable {
  final Core core;

  private Client(Builder builder) {
    core = new Core(builder);
  }

  /** A client of DLOCK_SERVER (else http://127.0.0.1:7070) with every other option default. */
  public static Client create() {
    return builder().build();
  }

  public static Builder builder() {
    return new Builder();
  }

  /** The options of a client. */
  public static final class Builder {
    List<String> servers = new ArrayList<>();
    String token;
    String tokenFile;
    String adminToken;
    String caFile;
    String certFile;
    String keyFile;
    Double clockDrift;
    Duration requestTimeout = Duration.ofSeconds(10);
    Duration retryBudget = Duration.ofSeconds(15);
    Duration backoffInitial = Duration.ofMillis(50);
    Duration backoffMax = Duration.ofSeconds(2);
    String namespace;
    Map<String, String> environment = System.getenv();

    private Builder() {}

    /** Server URLs (each may be a comma-separated list); several: failover between them. */
    public Builder servers(String... urls) {
      servers = new ArrayList<>(List.of(urls));
      return this;
    }

    /** The bearer token (else tokenFile, DLOCK_TOKEN, DLOCK_TOKEN_FILE). Never logged. */
    public Builder token(String bearer) {
      token = bearer;
      return this;
    }

    /** A file whose first line is the bearer token. */
    public Builder tokenFile(String path) {
      tokenFile = path;
      return this;
    }

    /** The token for revoke and clear-delay (else DLOCK_ADMIN_TOKEN, else the token). */
    public Builder adminToken(String bearer) {
      adminToken = bearer;
      return this;
    }

    /** PEM CA bundle that verifies an https:// server (else the JDK's trust store). */
    public Builder caFile(String path) {
      caFile = path;
      return this;
    }

    /** PEM client certificate and its key (PKCS #8 or PKCS #1 RSA) for mTLS. */
    public Builder clientCertificate(String certPath, String keyPath) {
      certFile = certPath;
      keyFile = keyPath;
      return this;
    }

    /** The clock-rate allowance, a fraction in [0, 0.5) (ADR-0012; default 0.01). */
    public Builder clockDrift(double fraction) {
      clockDrift = fraction;
      return this;
    }

    /** How long one request may take (a wait adds its own time). */
    public Builder requestTimeout(Duration timeout) {
      requestTimeout = positive(timeout, "requestTimeout");
      return this;
    }

    /** How long a call retries an unavailable server before it throws Unavailable. */
    public Builder retryBudget(Duration budget) {
      retryBudget = nonNegative(budget, "retryBudget");
      return this;
    }

    /** The back-off between retries: from {@code initial}, doubling, capped at {@code max}. */
    public Builder backoff(Duration initial, Duration max) {
      backoffInitial = positive(initial, "backoffInitial");
      backoffMax = positive(max, "backoffMax");
      return this;
    }

    /** The namespace of every key, semaphore and election (else DLOCK_NAMESPACE). */
    public Builder namespace(String ns) {
      namespace = ns;
      return this;
    }

    /** Where the DLOCK_* variables are read (tests); default the process environment. */
    Builder environment(Map<String, String> variables) {
      environment = Map.copyOf(variables);
      return this;
    }

    public Client build() {
      return new Client(this);
    }

    private static Duration positive(Duration d, String field) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new DlockException.InvalidArgument(field + ": must be positive", field, 0);
      }
      return d;
    }

    private static Duration nonNegative(Duration d, String field) {
      if (d == null || d.isNegative()) {
        throw new DlockException.InvalidArgument(field + ": must not be negative", field, 0);
      }
      return d;
    }
  }

  /** The servers, in the order they are tried. */
  public List<String> servers() {
    return core.servers;
  }

  public double clockDrift() {
    return core.clockDrift;
  }

  /** Nothing to free: sessions and locks close themselves. */
  @Override
  public void close() {}

  /** DLOCK_OWNER, else {@code <user>@<hostname>}: the owner reads show for this process. */
  String defaultOwner() {
    String owner = core.owner;
    if (owner != null && !owner.isEmpty()) {
      return owner;
    }
    String user = System.getProperty("user.name", "dlock");
    try {
      return user + "@" + InetAddress.getLocalHost().getHostName();
    } catch (UnknownHostException noName) {
      return user;
    }
  }

  /** Opens a session with the server's default TTL (keep-alive every TTL/3). */
  public Session session() {
    return session(null, null, null, null);
  }

  /**
   * Opens a session. {@code owner} null: {@link #defaultOwner}; {@code ttl} null: the server's
   * default; {@code lockDelay} null or zero: none; {@code onLost} may be null.
   */
  public Session session(String owner, Duration ttl, Duration lockDelay,
      java.util.function.Consumer<String> onLost) {
    return new Session(core, owner == null ? defaultOwner() : owner, ttl, lockDelay, onLost);
  }

  /**
   * A lock in a session of its own, both closed by {@link Lock#close()}: throws {@link
   * DlockException.Held} when another session holds the key.
   */
  public Lock lock(String key, Duration ttl) {
    return lock(key, LockOptions.ttl(ttl));
  }

  /** {@link #lock(String, Duration)}, waiting up to {@code wait} for the key. */
  public Lock lock(String key, Duration ttl, Duration wait) {
    return lock(key, LockOptions.ttl(ttl).waitUpTo(wait));
  }

  public Lock lock(String key, LockOptions options) {
    Session session = session();
    try {
      Lock lock = session.lock(key, options);
      lock.ownSession(session);
      return lock;
    } catch (RuntimeException failed) {
      session.close();
      throw failed;
    }
  }

  /** The waiting {@link #lock(String, LockOptions)} as a future; cancel(true) ends the wait. */
  public CompletableFuture<Lock> lockAsync(String key, LockOptions options) {
    return Async.run(
        "dlock-lock-" + key,
        cancel -> {
          Session session = session();
          try {
            Lock lock = session.lock(key, options, cancel);
            lock.ownSession(session);
            return lock;
          } catch (RuntimeException failed) {
            session.close();
            throw failed;
          }
        },
        lock -> {
          try {
            lock.close();
          } catch (DlockException ignored) {
            // it expires by itself
          }
        });
  }

  // --- reads and admin ---------------------------------------------------------------------

  private String lockPath(String key, String ns) {
    return "/v1/locks/" + Core.quote(key) + Core.query("ns", core.ns(ns));
  }

  /** The holder with the greatest token, or empty when the key is free. */
  public Optional<LockInfo> get(String key) {
    Map<String, Object> o =
        core.get(lockPath(key, null), "get " + key, core.callFor(), "lock_not_found");
    return o == null ? Optional.empty() : Optional.of(new LockInfo(o));
  }

  /** Every live holder of the key (several for shared locks); empty when it is free. */
  public List<LockInfo> holders(String key) {
    Map<String, Object> o =
        core.get(lockPath(key, null), "get " + key, core.callFor(), "lock_not_found");
    List<LockInfo> out = new ArrayList<>();
    if (o == null) {
      return out;
    }
    if (!o.containsKey("holders")) {
      out.add(new LockInfo(o));
      return out;
    }
    for (Map<String, Object> holder : Json.objects(o, "holders")) {
      out.add(new LockInfo(holder));
    }
    return out;
  }

  /** The semaphore: its agreed limit and its permit holders. */
  public SemaphoreInfo semaphore(String name) {
    Map<String, Object> o =
        core.get("/v1/semaphores/" + Core.quote(name) + Core.query("ns", core.ns(null)),
            "get semaphore " + name, core.callFor(), "");
    List<LockInfo> holders = new ArrayList<>();
    for (Map<String, Object> holder : Json.objects(o, "holders")) {
      holders.add(new LockInfo(holder));
    }
    return new SemaphoreInfo(Json.str(o, "name", name), Json.num(o, "limit", 0), holders);
  }

  /** The election's leader, or empty when nobody leads. */
  public Optional<LeaderInfo> leader(String name) {
    return observe(name, null, null, Duration.ZERO, null);
  }

  /**
   * One long poll: answers once a leader with a token greater than {@code afterToken} leads (or,
   * with {@code afterValue}, that leader proclaims another value), at the latest after {@code
   * wait} with the state then. Pass the last answer's token and value to see each change once.
   */
  public Optional<LeaderInfo> observe(String name, long afterToken, String afterValue,
      Duration wait) {
    return observe(name, afterToken, afterValue, wait, null);
  }

  /** {@link #observe(String, long, String, Duration)} as a future; cancel(true) ends the poll. */
  public CompletableFuture<Optional<LeaderInfo>> observeAsync(String name, long afterToken,
      String afterValue, Duration wait) {
    return Async.run("dlock-observe-" + name,
        cancel -> observe(name, afterToken, afterValue, wait, cancel), ignored -> {});
  }

  private Optional<LeaderInfo> observe(String name, Long afterToken, String afterValue,
      Duration wait, Cancel cancel) {
    long waitMs = Lease.millis(wait, "wait");
    Object[] params = {"ns", core.ns(null), "after_token", afterToken,
        "after_value", afterToken == null ? null : afterValue,
        "wait_ms", afterToken == null || waitMs == 0 ? null : waitMs};
    Core.Call call = core.callFor(core.retryBudget + waitMs * 1_000_000L, cancel);
    call.slack = waitMs * 1_000_000L;
    Map<String, Object> o =
        core.get("/v1/elections/" + Core.quote(name) + Core.query(params), "observe " + name,
            call, "no_leader");
    return o == null ? Optional.empty() : Optional.of(new LeaderInfo(name, o));
  }

  /**
   * Admin: ends the lock-delays running on {@code key}; whether one was running. Uses the admin
   * token as {@link #revoke} does.
   */
  public boolean clearDelay(String key) {
    return core.clearDelay(key, null, core.callFor());
  }

  /** Admin: ends the key's grant (adminToken or DLOCK_ADMIN_TOKEN, else the token). */
  public Map<String, Object> revoke(String key) {
    return core.revoke(key, null, core.callFor());
  }
}
