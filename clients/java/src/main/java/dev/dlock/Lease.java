package dev.dlock;

import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The client-side deadline of a lease, durations and the retry back-off.
 *
 * <p>The deadline rule is the C++ client's (docs/client.md "Client deadlines", ADR-0012): a lease
 * whose request was <em>sent</em> at {@code sentAt} ({@link System#nanoTime}) is trusted until
 *
 * <pre>
 *   sentAt + trusted - ceil(trusted * clockDrift)     (milliseconds)
 *   trusted = min(TTL asked, TTL answered)            (the answered one when none was asked)
 * </pre>
 *
 * so the client stops believing in a lock no later than the server expires it, even when the
 * server answers more than was asked or its clock runs faster than ours.
 */
final class Lease {
  /** The clock-rate allowance when neither the option nor DLOCK_CLOCK_DRIFT sets one (1 %). */
  static final double DEFAULT_CLOCK_DRIFT = 0.01;

  private static final Pattern DURATION =
      Pattern.compile("^\\s*(\\d+(?:\\.\\d+)?)\\s*(ms|s|m|h)\\s*$");

  private Lease() {}

  /** The TTL a lease is trusted for: a server answering more than asked never lengthens trust. */
  static long trustedTtlMs(long askedMs, long answeredMs) {
    if (askedMs <= 0) {
      return answeredMs;
    }
    if (answeredMs <= 0) {
      return askedMs;
    }
    return Math.min(askedMs, answeredMs);
  }

  /**
   * The {@link System#nanoTime} until which a lease of {@code ttlMs} sent at {@code sentAt} holds.
   */
  static long deadline(long sentAt, long ttlMs, double clockDrift) {
    long allowanceMs = (long) Math.ceil(ttlMs * clockDrift);
    return sentAt + (ttlMs - allowanceMs) * 1_000_000L;
  }

  /**
   * The delay before retry {@code attempt} (0 = the first): with d = min(max, initial * 2^attempt),
   * a value in [d/2, d]. The random half keeps clients that failed together from retrying in
   * lock-step; the fixed half keeps the delay from collapsing to zero.
   */
  static long backoffNanos(long initialNanos, long maxNanos, int attempt, double randomFraction) {
    double full = Math.min((double) maxNanos, initialNanos * Math.pow(2, Math.min(attempt, 30)));
    return (long) (full / 2 + (full / 2) * randomFraction);
  }

  /** {@code "500ms"}, {@code "10s"}, {@code "5m"}, {@code "1h"}: a duration. */
  static Duration parseDuration(String text, String field) {
    Matcher match = DURATION.matcher(text);
    if (!match.matches()) {
      throw new DlockException.InvalidArgument(
          field + ": not a duration: '" + text + "' (e.g. 500ms, 10s, 5m, 1h)", field, 0);
    }
    double number = Double.parseDouble(match.group(1));
    long unit;
    switch (match.group(2)) {
      case "ms":
        unit = 1;
        break;
      case "s":
        unit = 1000;
        break;
      case "m":
        unit = 60_000;
        break;
      default:
        unit = 3_600_000;
    }
    return Duration.ofMillis(Math.round(number * unit));
  }

  /** {@code "0.01"} or {@code "1%"}: a fraction in [0, 0.5). */
  static double parseClockDrift(String text, String field) {
    String number = text.strip();
    boolean percent = number.endsWith("%");
    double value;
    try {
      value = Double.parseDouble(percent ? number.substring(0, number.length() - 1) : number);
    } catch (NumberFormatException notANumber) {
      value = -1;
    }
    if (percent) {
      value /= 100;
    }
    checkClockDrift(value, field, text);
    return value;
  }

  static double checkClockDrift(double value, String field, String shown) {
    if (!(value >= 0 && value < 0.5)) {
      throw new DlockException.InvalidArgument(
          field + ": '" + shown + "' is not a clock-rate allowance in [0, 0.5), e.g. 0.01 or 1%",
          field, 0);
    }
    return value;
  }

  static long millis(Duration duration, String field) {
    if (duration == null) {
      return 0;
    }
    if (duration.isNegative()) {
      throw new DlockException.InvalidArgument(field + ": a negative duration", field, 0);
    }
    return duration.toMillis();
  }
}
