package dev.dlock;

import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Function;

/** A call run on a daemon thread of its own, as a future whose cancel() cancels the call. */
final class Async {
  private Async() {}

  /**
   * Runs {@code body}; a value that arrives after the future was cancelled goes to
   * {@code discard} (a grant nobody will use is released at once).
   */
  static <T> CompletableFuture<T> run(String name, Function<Cancel, T> body, Consumer<T> discard) {
    Cancel cancel = new Cancel();
    CompletableFuture<T> future =
        new CompletableFuture<>() {
          @Override
          public boolean cancel(boolean mayInterrupt) {
            cancel.cancel();
            return super.cancel(mayInterrupt);
          }
        };
    Thread thread =
        new Thread(
            () -> {
              try {
                T value = body.apply(cancel);
                if (!future.complete(value)) {
                  discard.accept(value);
                }
              } catch (RuntimeException | Error failed) {
                future.completeExceptionally(failed);
              }
            },
            name);
    thread.setDaemon(true);
    thread.start();
    return future;
  }
}
