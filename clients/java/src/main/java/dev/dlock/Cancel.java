package dev.dlock;

import java.util.concurrent.CompletableFuture;

/**
 * Ends a call early: a caller cancelling a wait, or a background loop being stopped. Cancelling
 * aborts the request in flight (its connection is closed, so dlockd drops a waiter at once) and
 * wakes a back-off pause.
 */
final class Cancel {
  private boolean cancelled;
  private CompletableFuture<?> inflight;

  synchronized void cancel() {
    cancelled = true;
    if (inflight != null) {
      inflight.cancel(true);
    }
    notifyAll();
  }

  synchronized boolean isCancelled() {
    return cancelled;
  }

  synchronized void attach(CompletableFuture<?> request) {
    inflight = request;
    if (cancelled) {
      request.cancel(true);
    }
  }

  synchronized void detach() {
    inflight = null;
  }

  /** Waits {@code nanos} unless cancelled first; then throws {@link DlockException.Cancelled}. */
  synchronized void pause(long nanos, String what) {
    long end = System.nanoTime() + nanos;
    long left;
    while (!cancelled && (left = end - System.nanoTime()) > 0) {
      try {
        wait(Math.max(1, left / 1_000_000), 0);
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
        cancelled = true;
      }
    }
    if (cancelled) {
      throw new DlockException.Cancelled(what + ": cancelled");
    }
  }

  /** Pauses on a fresh token nobody cancels (a call without a cancel of its own). */
  static void pause(Cancel cancel, long nanos, String what) {
    (cancel != null ? cancel : new Cancel()).pause(nanos, what);
  }
}
