package dev.dlock;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A dlockd session kept alive by a background thread every TTL/3. When the server no longer has
 * it, or its deadline passes without a successful keep-alive, it is lost ({@link #onLost}), and
 * every lock of it with it. Close it (try-with-resources) to release its locks at once.
 */
public final class Session extends Trusted implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger("dev.dlock");

  final Core core;
  private final String id;
  private final String owner;
  private final long ttlMs;
  private final long lockDelayMs;
  private long deadline; // System.nanoTime(); guarded by this
  final List<Lock> locks = new CopyOnWriteArrayList<>();
  volatile boolean closed;
  volatile boolean gone; // the server said it does not exist: nothing to close
  private final Cancel stop = new Cancel();
  private final Thread thread;

  Session(Core core, String owner, Duration ttl, Duration lockDelay, Consumer<String> onLost) {
    super(onLost);
    this.core = core;
    long askedTtl = Lease.millis(ttl, "ttl");
    Core.Exchange exchange =
        core.openSession(owner, askedTtl, Lease.millis(lockDelay, "lockDelay"), core.callFor());
    Map<String, Object> answer = exchange.json("open session");
    id = Json.str(answer, "session_id", "");
    if (id.isEmpty()) {
      throw new DlockException.Internal("open session: the server sent no session_id", 201);
    }
    this.owner = Json.str(answer, "owner", owner);
    ttlMs = Lease.trustedTtlMs(askedTtl, Json.num(answer, "ttl_ms", 0));
    if (ttlMs <= 0) {
      throw new DlockException.Internal("open session: the server granted no ttl_ms", 201);
    }
    lockDelayMs = Json.num(answer, "lock_delay_ms", 0);
    deadline = Lease.deadline(exchange.sentAt, ttlMs, core.clockDrift);
    long sentAt = exchange.sentAt;
    thread = new Thread(() -> keepaliveLoop(sentAt), "dlock-keepalive-" + id);
    thread.setDaemon(true);
    thread.start();
  }

  public String id() {
    return id;
  }

  public String owner() {
    return owner;
  }

  /** The TTL the session is trusted for on each keep-alive, in milliseconds. */
  public long ttlMillis() {
    return ttlMs;
  }

  /** The lock-delay the server granted, in milliseconds. */
  public long lockDelayMillis() {
    return lockDelayMs;
  }

  /** {@link System#nanoTime} until which the session is trusted; far past once lost. */
  @Override
  public synchronized long deadlineNanos() {
    return loss.isSet() ? Long.MIN_VALUE / 2 : deadline;
  }

  @Override
  boolean ended() {
    return closed;
  }

  void markLost(String reason) {
    if (loss.mark(reason)) {
      for (Lock lock : locks) {
        lock.markLost("session lost: " + reason); // a lock dies with its session
      }
    }
  }

  private void keepaliveLoop(long sentAt) {
    long nextAt = sentAt + ttlMs * 1_000_000L / 3;
    while (true) {
      try {
        stop.pause(Math.max(0, nextAt - System.nanoTime()), "keepalive");
      } catch (DlockException.Cancelled stopped) {
        return;
      }
      long due;
      synchronized (this) {
        due = deadline;
      }
      try {
        Core.Exchange exchange = core.keepalive(id, new Core.Call(due, stop));
        // A keep-alive renews for the session's TTL: never trust more than it opened with.
        long ttl = Lease.trustedTtlMs(ttlMs, Json.num(exchange.json("keepalive"), "ttl_ms", 0));
        synchronized (this) {
          deadline = Lease.deadline(exchange.sentAt, ttl, core.clockDrift);
        }
        nextAt = exchange.sentAt + ttl * 1_000_000L / 3;
      } catch (DlockException.SessionNotFound error) {
        gone = true;
        markLost("session expired on the server: " + error.getMessage());
        return;
      } catch (DlockException error) {
        if (stop.isCancelled()) {
          return;
        }
        if (System.nanoTime() - due >= 0) {
          markLost("no successful keepalive within the session TTL: " + error.getMessage());
          return;
        }
        LOG.log(Level.FINE, "dlock: keepalive of session {0} failed, retrying: {1}",
            new Object[] {id, error.getMessage()});
        nextAt = Math.min(due, System.nanoTime() + core.backoffInitial);
      }
    }
  }

  /** Stops the keep-alive and closes the session on the server (releasing its locks). */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    stop.cancel();
    if (thread != Thread.currentThread()) {
      try {
        thread.join();
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
      }
    }
    for (Lock lock : locks) {
      lock.stopExtending();
    }
    if (gone) {
      return;
    }
    try {
      // Short: closing is a courtesy (the session expires by itself).
      core.closeSession(id, core.callFor(core.requestTimeout, null));
    } catch (DlockException.SessionNotFound alreadyGone) {
      // expired: nothing to close
    }
  }

  private static void discard(Optional<? extends Lock> granted) {
    granted.ifPresent(
        lock -> {
          try {
            lock.release();
          } catch (DlockException ignored) {
            // it expires by itself
          }
        });
  }

  // --- acquiring ---------------------------------------------------------------------------

  /**
   * Acquires {@code key}: the lock, or empty when it is still held after the options' wait.
   * Throws a typed {@link DlockException} for anything else (an outage is never "held").
   */
  public Optional<Lock> acquire(String key, LockOptions options) {
    return acquire(key, options, null);
  }

  /** {@link #acquire(String, LockOptions)} with the key's defaults and a TTL. */
  public Optional<Lock> acquire(String key, Duration ttl) {
    return acquire(key, LockOptions.ttl(ttl));
  }

  Optional<Lock> acquire(String key, LockOptions options, Cancel cancel) {
    try {
      return Optional.of(lock(key, options, cancel));
    } catch (DlockException.Held held) {
      return Optional.empty();
    }
  }

  /**
   * The waiting acquire as a future: completes with the lock, or empty when still held after the
   * wait. {@code cancel(true)} on it ends the wait at once (the waiting request is closed, so
   * dlockd drops the waiter).
   */
  public CompletableFuture<Optional<Lock>> acquireAsync(String key, LockOptions options) {
    return Async.run("dlock-acquire-" + key, cancel -> acquire(key, options, cancel),
        Session::discard);
  }

  /**
   * Acquires {@code key} for a try-with-resources block: throws {@link DlockException.Held} when
   * it is still held after the wait (its {@code delayedUntil} set when a lock-delay is why).
   */
  public Lock lock(String key, LockOptions options) {
    return lock(key, options, null);
  }

  /** {@link #lock(String, LockOptions)} with a TTL. */
  public Lock lock(String key, Duration ttl) {
    return lock(key, LockOptions.ttl(ttl));
  }

  Lock lock(String key, LockOptions options, Cancel cancel) {
    options.validate(key);
    Core.Ask ask = new Core.Ask();
    ask.key = key;
    ask.sessionId = id;
    ask.ttlMs = Lease.millis(options.ttl, "ttl");
    ask.sessionBound = options.sessionBound;
    ask.waitMs = Lease.millis(options.wait, "wait");
    ask.ns = options.namespace;
    ask.mode = options.mode;
    ask.limit = options.permits;
    Core.Exchange exchange =
        core.acquire(ask, core.callFor(core.retryBudget + ask.waitMs * 1_000_000L, cancel));
    Map<String, Object> answer = exchange.json("acquire " + key);
    return new Lock(this, key, options.namespace, answer, exchange.sentAt, ask.ttlMs,
        options.mode, options.autoExtend, options.onLost);
  }

  /**
   * Campaigns to lead the election {@code name} with {@code value}: the leadership, or empty when
   * another session still leads after {@code wait}. A leadership lives as long as the session.
   */
  public Optional<Leadership> campaign(String name, String value, Duration wait) {
    return campaign(name, value, wait, null, null);
  }

  /** The waiting campaign as a future; {@code cancel(true)} ends the wait. */
  public CompletableFuture<Optional<Leadership>> campaignAsync(String name, String value,
      Duration wait) {
    return Async.run("dlock-campaign-" + name, cancel -> campaign(name, value, wait, null, cancel),
        Session::discard);
  }

  Optional<Leadership> campaign(String name, String value, Duration wait, String ns,
      Cancel cancel) {
    Core.Ask ask = new Core.Ask();
    ask.key = name;
    ask.sessionId = id;
    ask.sessionBound = true;
    ask.waitMs = Lease.millis(wait, "wait");
    ask.ns = ns;
    ask.leaderValue = value;
    Core.Exchange exchange;
    try {
      long budget = core.retryBudget + ask.waitMs * 1_000_000L;
      exchange = core.acquire(ask, core.callFor(budget, cancel));
    } catch (DlockException.Held held) {
      return Optional.empty();
    }
    Map<String, Object> answer = exchange.json("campaign " + name);
    String leading = Json.str(Json.obj(answer, "leader"), "value", value);
    return Optional.of(new Leadership(this, name, ns, answer, exchange.sentAt, leading));
  }
}
