package dev.dlock;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.logging.Level;
import java.util.logging.Logger;

/** The first loss wins: records its reason, completes the future, calls each callback once. */
final class LossSignal {
  private static final Logger LOG = Logger.getLogger("dev.dlock");

  final CompletableFuture<String> lost = new CompletableFuture<>();
  private final List<Consumer<String>> callbacks = new ArrayList<>();

  LossSignal(Consumer<String> callback) {
    if (callback != null) {
      callbacks.add(callback);
    }
  }

  boolean isSet() {
    return lost.isDone();
  }

  String reason() {
    return lost.getNow("");
  }

  /** Marks the loss; false when an earlier one won. */
  boolean mark(String reason) {
    List<Consumer<String>> toCall;
    synchronized (this) {
      if (lost.isDone()) {
        return false;
      }
      lost.complete(reason);
      toCall = new ArrayList<>(callbacks);
    }
    toCall.forEach(callback -> run(callback, reason));
    return true;
  }

  /** Calls {@code callback} once on the loss, now when it already happened. */
  void add(Consumer<String> callback) {
    synchronized (this) {
      if (!lost.isDone()) {
        callbacks.add(callback);
        return;
      }
    }
    run(callback, reason());
  }

  private static void run(Consumer<String> callback, String reason) {
    try {
      callback.accept(reason);
    } catch (RuntimeException failed) {
      LOG.log(Level.WARNING, "dlock: an onLost callback failed", failed);
    }
  }
}
