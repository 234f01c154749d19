package dev.dlock;

import java.time.Duration;
import java.util.function.Consumer;

/**
 * How to acquire: immutable, each setter returns a changed copy.
 *
 * <pre>{@code
 * LockOptions.ttl(Duration.ofSeconds(10)).waitUpTo(Duration.ofSeconds(5)).shared()
 * }</pre>
 */
public final class LockOptions {
  /** An exclusive lock, a shared (read) lock, or one permit of a semaphore. */
  public enum Mode {
    EXCLUSIVE,
    SHARED,
    PERMIT
  }

  final Duration ttl; // null: the server's default (30 s)
  final Duration wait;
  final boolean autoExtend;
  final boolean sessionBound;
  final Mode mode;
  final int permits;
  final String namespace;
  final Consumer<String> onLost;

  private LockOptions(Duration ttl, Duration wait, boolean autoExtend, boolean sessionBound,
      Mode mode, int permits, String namespace, Consumer<String> onLost) {
    this.ttl = ttl;
    this.wait = wait;
    this.autoExtend = autoExtend;
    this.sessionBound = sessionBound;
    this.mode = mode;
    this.permits = permits;
    this.namespace = namespace;
    this.onLost = onLost;
  }

  /** An exclusive lock with the server's default TTL, no wait, auto-extended. */
  public static LockOptions defaults() {
    return new LockOptions(null, Duration.ZERO, true, false, Mode.EXCLUSIVE, 0, null, null);
  }

  /** {@link #defaults()} with a TTL. */
  public static LockOptions ttl(Duration ttl) {
    return defaults().withTtl(ttl);
  }

  /** The lock's lease; null for the server's default. */
  public LockOptions withTtl(Duration ttl) {
    return new LockOptions(ttl, wait, autoExtend, sessionBound, mode, permits, namespace, onLost);
  }

  /** Waits up to {@code wait} for the key (first come, first served); zero: answer at once. */
  public LockOptions waitUpTo(Duration wait) {
    return new LockOptions(ttl, wait, autoExtend, sessionBound, mode, permits, namespace, onLost);
  }

  /** Extends the lock every TTL/3 from a background thread (the default). */
  public LockOptions autoExtend(boolean on) {
    return new LockOptions(ttl, wait, on, sessionBound, mode, permits, namespace, onLost);
  }

  /** A lock that lives exactly as long as its session (no TTL of its own). */
  public LockOptions sessionBound() {
    return new LockOptions(ttl, wait, autoExtend, true, mode, permits, namespace, onLost);
  }

  /** A shared (read) lock: a writer's token orders it after every reader before it. */
  public LockOptions shared() {
    return new LockOptions(ttl, wait, autoExtend, sessionBound, Mode.SHARED, 0, namespace, onLost);
  }

  /** One of {@code limit} permits of the semaphore named by the key. */
  public LockOptions permits(int limit) {
    return new LockOptions(ttl, wait, autoExtend, sessionBound, Mode.PERMIT, limit, namespace,
        onLost);
  }

  /** The namespace of the key (default: the client's). */
  public LockOptions namespace(String ns) {
    return new LockOptions(ttl, wait, autoExtend, sessionBound, mode, permits, ns, onLost);
  }

  /** Called once, with the reason, when the lock is known lost (see {@link Lock#onLost}). */
  public LockOptions onLost(Consumer<String> callback) {
    return new LockOptions(ttl, wait, autoExtend, sessionBound, mode, permits, namespace, callback);
  }

  void validate(String key) {
    if (mode == Mode.PERMIT && permits <= 0) {
      throw new DlockException.InvalidArgument(
          "acquire " + key + ": a semaphore needs permits > 0", "limit", 0);
    }
    if (sessionBound && ttl != null && !ttl.isZero()) {
      throw new DlockException.InvalidArgument(
          "acquire " + key + ": a session-bound lock has no TTL of its own", "ttl_ms", 0);
    }
  }
}
