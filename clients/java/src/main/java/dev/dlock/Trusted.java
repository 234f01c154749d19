package dev.dlock;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Function;

/** What a session and a lock share: a client deadline and a lost signal that fires once. */
abstract class Trusted {
  final LossSignal loss;

  Trusted(Consumer<String> onLost) {
    loss = new LossSignal(onLost);
  }

  /** {@link System#nanoTime} until which it is trusted. */
  public abstract long deadlineNanos();

  /** Released or closed by its holder. */
  abstract boolean ended();

  /** How long it is still trusted (zero or negative once it is not). */
  public Duration remaining() {
    return Duration.ofNanos(deadlineNanos() - System.nanoTime());
  }

  /** Not ended, not lost, and before its deadline. */
  public boolean isValid() {
    return !ended() && !loss.isSet() && System.nanoTime() - deadlineNanos() < 0;
  }

  public boolean isLost() {
    return loss.isSet();
  }

  /** Why it was lost; "" while it is not. */
  public String lostReason() {
    return loss.reason();
  }

  /**
   * Calls {@code callback} once, with the reason, when it is known lost: the server said it is
   * gone, or its deadline passed without a successful renewal (now, if it already is).
   */
  public void onLost(Consumer<String> callback) {
    loss.add(callback);
  }

  /** Completes with the reason when it is known lost. */
  public CompletableFuture<String> lost() {
    return loss.lost.thenApply(Function.identity());
  }
}
