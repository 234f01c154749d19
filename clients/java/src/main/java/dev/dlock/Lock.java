package dev.dlock;

import java.time.Duration;
import java.util.Map;
import java.util.function.Consumer;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A grant held through a {@link Session}: {@link #token()} is its fencing token, fixed for its
 * life. Trusted until {@link #deadlineNanos()}: the send time of the acquire (or last extend) +
 * min(TTL asked, TTL answered) less the clock-rate allowance, and never past its session's
 * deadline. {@link #onLost} callbacks run once when it is known lost; {@link #check()} throws
 * {@link DlockException.LockLost} once it is no longer trusted. {@link #close()} releases it.
 */
public class Lock extends Trusted implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger("dev.dlock");

  final Session session;
  final Core core;
  private final String key;
  final String ns;
  private final long token;
  private final LockOptions.Mode mode;
  private final boolean sessionBound;
  private final long askedTtlMs;
  private long ttlMs; // guarded by this
  private long deadline; // System.nanoTime(); guarded by this
  volatile boolean released;
  volatile boolean gone;
  private final Cancel stop = new Cancel();
  private Thread thread;
  private Session ownedSession; // Client.lock: closed with the lock

  Lock(Session session, String key, String ns, Map<String, Object> answer, long sentAt,
      long askedTtlMs, LockOptions.Mode mode, boolean autoExtend, Consumer<String> onLost) {
    super(onLost);
    this.session = session;
    this.core = session.core;
    this.key = key;
    this.ns = ns;
    this.token = Json.num(answer, "fencing_token", 0);
    this.mode = mode;
    this.askedTtlMs = askedTtlMs;
    // A leader lives exactly as long as its session (C3), whatever the answer says.
    this.sessionBound =
        this instanceof Leadership || "session".equals(Json.str(answer, "lease", ""));
    this.ttlMs = Lease.trustedTtlMs(askedTtlMs, Json.num(answer, "ttl_ms", 0));
    // A session-bound lock is trusted exactly as long as its session.
    this.deadline =
        sessionBound ? Long.MAX_VALUE : Lease.deadline(sentAt, ttlMs, core.clockDrift);
    session.locks.add(this);
    if (session.isLost()) { // lost while the acquire was in flight
      markLost("session lost: " + session.lostReason());
    }
    if (autoExtend && !sessionBound) {
      thread = new Thread(() -> extendLoop(sentAt), "dlock-extend-" + key);
      thread.setDaemon(true);
      thread.start();
    }
  }

  void ownSession(Session owned) {
    ownedSession = owned;
  }

  public String key() {
    return key;
  }

  /** The fencing token: pass it with every write to the protected resource. */
  public long token() {
    return token;
  }

  public LockOptions.Mode mode() {
    return mode;
  }

  public Session session() {
    return session;
  }

  /**
   * {@link System#nanoTime} until which this lock is trusted: its own deadline, capped by its
   * session's.
   */
  @Override
  public long deadlineNanos() {
    long own;
    synchronized (this) {
      own = deadline;
    }
    long ofSession = session.deadlineNanos();
    return ofSession - own < 0 ? ofSession : own;
  }

  @Override
  boolean ended() {
    return released;
  }

  /** Throws {@link DlockException.LockLost} unless the lock is still trusted: call it per write. */
  public void check() {
    if (isValid()) {
      return;
    }
    if (!released && !loss.isSet() && System.nanoTime() - deadlineNanos() >= 0) {
      markLost("the lock's client deadline passed without a successful extend");
    }
    String reason = loss.reason();
    throw new DlockException.LockLost(
        key + " (token " + token + "): " + (reason.isEmpty() ? "released" : reason), 0);
  }

  void markLost(String reason) {
    loss.mark(reason);
  }

  private void record(Core.Exchange exchange) {
    if (sessionBound) {
      return; // its deadline is the session's, which keep-alives move
    }
    long ttl = Lease.trustedTtlMs(askedTtlMs, Json.num(exchange.json("extend"), "ttl_ms", 0));
    synchronized (this) {
      ttlMs = ttl;
      deadline = Lease.deadline(exchange.sentAt, ttl, core.clockDrift);
    }
  }

  private void extendLoop(long sentAt) {
    long nextAt;
    synchronized (this) {
      nextAt = sentAt + ttlMs * 1_000_000L / 3;
    }
    while (true) {
      try {
        stop.pause(Math.max(0, nextAt - System.nanoTime()), "extend");
      } catch (DlockException.Cancelled stopped) {
        return;
      }
      if (loss.isSet()) {
        return; // lost with its session: nothing left to extend
      }
      long due;
      long ttl;
      synchronized (this) {
        due = deadline;
        ttl = ttlMs;
      }
      try {
        // `stop` also cancels an extend in flight: release() need not wait for it.
        Core.Exchange exchange =
            core.extend(key, session.id(), token, ttl, ns, mode, new Core.Call(due, stop));
        record(exchange);
        synchronized (this) {
          nextAt = exchange.sentAt + ttlMs * 1_000_000L / 3;
        }
      } catch (DlockException.LockLost error) {
        gone = true;
        markLost("lock lost: " + error.getMessage());
        return;
      } catch (DlockException.SessionNotFound error) {
        gone = true;
        session.gone = true;
        session.markLost("session expired on the server: " + error.getMessage());
        return;
      } catch (DlockException error) {
        if (stop.isCancelled()) {
          return;
        }
        if (System.nanoTime() - due >= 0) {
          markLost("no successful extend before the lock's deadline: " + error.getMessage());
          return;
        }
        LOG.log(Level.FINE, "dlock: extending {0} failed, retrying: {1}",
            new Object[] {key, error.getMessage()});
        nextAt = Math.min(due, System.nanoTime() + core.backoffInitial);
      }
    }
  }

  /** Extends the lock now with the same token; {@code ttl} null: its current TTL. */
  public void extend(Duration ttl) {
    long ms;
    synchronized (this) {
      ms = ttl == null ? ttlMs : Lease.millis(ttl, "ttl");
    }
    try {
      record(core.extend(key, session.id(), token, ms, ns, mode, core.callFor()));
    } catch (DlockException.LockLost error) {
      gone = true;
      markLost("lock lost: " + error.getMessage());
      throw error;
    }
  }

  void stopExtending() {
    stop.cancel();
    Thread extender = thread;
    if (extender != null && extender != Thread.currentThread()) {
      try {
        extender.join();
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Releases the grant. Throws {@link DlockException.LockLost} when it was already lost. */
  public void release() {
    if (released) {
      return;
    }
    released = true;
    stopExtending();
    session.locks.remove(this);
    if (gone || session.gone) {
      String reason = loss.reason();
      throw new DlockException.LockLost(
          "release " + key + ": " + (reason.isEmpty() ? "gone" : reason), 0);
    }
    if (session.closed) {
      return; // closing the session released it
    }
    core.release(key, session.id(), token, ns, mode, core.callFor(core.requestTimeout, null));
  }

  /**
   * Releases the lock (and closes the session {@link Client#lock} opened for it). Throws {@link
   * DlockException.LockLost} when the lock was lost while held: the work done under it may not
   * have been protected.
   */
  @Override
  public void close() {
    boolean lostWhileHeld = loss.isSet();
    try {
      try {
        release();
      } catch (DlockException.LockLost alreadyLost) {
        lostWhileHeld = true;
      }
    } finally {
      if (ownedSession != null) {
        ownedSession.close();
      }
    }
    if (lostWhileHeld) {
      throw new DlockException.LockLost(
          key + " (token " + token + ") was lost while held: " + loss.reason(), 0);
    }
  }
}
