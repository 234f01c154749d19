package dev.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The client deadline (ADR-0012) and the back-off: arithmetic, then through a real request. */
class LeaseTest {
  private static final long MS = 1_000_000L;

  @Test
  void trustsTheSmallerOfAskedAndAnswered() {
    assertEquals(4000, Lease.trustedTtlMs(4000, 10_000)); // a server answering more: not trusted
    assertEquals(3000, Lease.trustedTtlMs(4000, 3000));
    assertEquals(10_000, Lease.trustedTtlMs(0, 10_000)); // nothing asked: the server's default
    assertEquals(4000, Lease.trustedTtlMs(4000, 0));
  }

  @Test
  void deadlineIsSendTimePlusTtlLessTheDriftAllowance() {
    long sent = 123_456_789L;
    assertEquals(sent + 3000 * MS, Lease.deadline(sent, 4000, 0.25));
    assertEquals(sent + 9900 * MS, Lease.deadline(sent, 10_000, 0.01));
    assertEquals(sent + 990 * MS, Lease.deadline(sent, 1001, 0.01)); // the allowance rounds up
    assertEquals(sent + 4000 * MS, Lease.deadline(sent, 4000, 0));
  }

  @Test
  void backoffDoublesWithinItsCapAndKeepsHalf() {
    long initial = 50 * MS;
    long max = 2000 * MS;
    for (int attempt = 0; attempt < 40; attempt++) {
      long full = Math.min(max, initial << Math.min(attempt, 30));
      assertEquals(full / 2, Lease.backoffNanos(initial, max, attempt, 0.0), 1);
      assertEquals(full, Lease.backoffNanos(initial, max, attempt, 1.0), 1);
    }
  }

  @Test
  void durationsAndClockDrift() {
    assertEquals(Duration.ofMillis(500), Lease.parseDuration("500ms", "d"));
    assertEquals(Duration.ofSeconds(10), Lease.parseDuration("10s", "d"));
    assertEquals(Duration.ofMinutes(5), Lease.parseDuration("5m", "d"));
    assertEquals(Duration.ofMillis(1500), Lease.parseDuration("1.5s", "d"));
    assertThrows(DlockException.InvalidArgument.class, () -> Lease.parseDuration("10", "d"));
    assertEquals(0.01, Lease.parseClockDrift("1%", "x"), 1e-12);
    assertEquals(0.25, Lease.parseClockDrift("0.25", "x"), 1e-12);
    assertThrows(DlockException.InvalidArgument.class, () -> Lease.parseClockDrift("0.5", "x"));
    assertThrows(DlockException.InvalidArgument.class, () -> Lease.parseClockDrift("-1%", "x"));
  }

  private static String grant(long ttlMs) {
    return "{\"key\":\"k\",\"fencing_token\":7,\"ttl_ms\":" + ttlMs + ",\"lease\":\"ttl\"}";
  }

  /** A server that answers a longer TTL than asked does not lengthen the client's trust. */
  @Test
  void aLockIsTrustedForTheAskedTtlWhenTheServerAnswersMore() throws Exception {
    try (FakeServer server = FakeServer.withSessions(30_000, 200, grant(60_000));
        Session session = server.client(0.25).session()) {
      long before = System.nanoTime();
      Lock lock = session.lock("k", LockOptions.ttl(Duration.ofSeconds(4)).autoExtend(false));
      long trusted = lock.deadlineNanos() - before;
      assertTrue(trusted <= 3200 * MS, "trusted for " + trusted / 1e6 + " ms, asked 4 s");
      assertTrue(trusted >= 2900 * MS, "trusted for " + trusted / 1e6 + " ms");
      assertEquals(7, lock.token());
    }
  }

  /** A lock's deadline never passes its session's. */
  @Test
  void aLockIsTrustedNoLongerThanItsSession() throws Exception {
    try (FakeServer server = FakeServer.withSessions(2000, 200, grant(20_000));
        Session session = server.client(0.01).session(null, Duration.ofSeconds(2), null, null)) {
      Lock lock = session.lock("k", LockOptions.ttl(Duration.ofSeconds(20)).autoExtend(false));
      assertTrue(lock.deadlineNanos() - session.deadlineNanos() <= 0,
          "the lock outlives its session");
      session.markLost("test");
      assertTrue(lock.isLost());
      assertThrows(DlockException.LockLost.class, lock::check);
    }
  }
}
