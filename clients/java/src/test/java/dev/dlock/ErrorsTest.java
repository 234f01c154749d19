package dev.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Every C3 error code to its typed error; "held" a decision; an outage never "held". */
class ErrorsTest {
  private static byte[] error(String code) {
    return ("{\"error\":{\"code\":\"" + code + "\",\"message\":\"m\",\"field\":\"limit\"}}")
        .getBytes(StandardCharsets.UTF_8);
  }

  @ParameterizedTest
  @CsvSource({
    "400, invalid_argument, InvalidArgument",
    "413, payload_too_large, InvalidArgument",
    "404, not_found, InvalidArgument",
    "405, method_not_allowed, InvalidArgument",
    "401, unauthenticated, Unauthenticated",
    "401, unauthorized, Unauthenticated",
    "403, permission_denied, PermissionDenied",
    "403, forbidden, PermissionDenied",
    "404, session_not_found, SessionNotFound",
    "409, lock_lost, LockLost",
    "404, lock_not_found, LockLost",
    "409, held, Held",
    "409, conflict, Conflict",
    "429, too_many_requests, ResourceExhausted",
    "503, unavailable, Unavailable",
    "503, not_leader, NotLeader",
    "500, internal, Internal",
    "502, '', Unavailable",
    "504, '', Unavailable",
    "418, '', InvalidArgument",
    "500, '', Internal",
  })
  void mapsEveryCode(int status, String code, String type) {
    byte[] body =
        code.isEmpty() ? "<html>proxy</html>".getBytes(StandardCharsets.UTF_8) : error(code);
    DlockException mapped = DlockException.fromResponse(status, body, "acquire k", "k");
    assertEquals(type, mapped.getClass().getSimpleName(), mapped.getMessage());
  }

  @Test
  void unavailableIsNeverHeld() {
    for (String code : new String[] {"unavailable", "not_leader", ""}) {
      DlockException mapped = DlockException.fromResponse(503, error(code), "acquire k", "k");
      assertInstanceOf(DlockException.Unavailable.class, mapped);
      assertTrue(mapped.retryable());
    }
  }

  @Test
  void conflictNamesItsField() {
    DlockException mapped = DlockException.fromResponse(409, error("conflict"), "acquire k", "k");
    assertEquals(Optional.of("limit"), mapped.field());
  }

  private static FakeServer answering(int status, String code) throws Exception {
    return FakeServer.withSessions(
        30_000, status, "{\"error\":{\"code\":\"" + code + "\",\"message\":\"backend down\"}}");
  }

  /** A backend outage (503) is retried, then a typed Unavailable: never held, by no form. */
  @Test
  void outageIsUnavailableNeverHeld() throws Exception {
    try (FakeServer server = answering(503, "unavailable");
        Session session = server.client(0.01).session()) {
      assertThrows(DlockException.Unavailable.class,
          () -> session.acquire("k", LockOptions.defaults()));
      assertThrows(DlockException.Unavailable.class,
          () -> session.lock("k", LockOptions.defaults()));
      assertThrows(DlockException.Unavailable.class,
          () -> session.acquire("k", LockOptions.defaults().waitUpTo(Duration.ofMillis(300))));
      long acquires = server.requests.stream().filter(r -> r.contains("/acquire")).count();
      assertTrue(acquires >= 6, "retried: " + acquires + " acquires");
    }
  }

  /** Held is a value from acquire and a typed error naming the key, never a holder. */
  @Test
  void heldIsADecision() throws Exception {
    try (FakeServer server = answering(409, "held");
        Session session = server.client(0.01).session()) {
      assertFalse(session.acquire("payouts/1", LockOptions.defaults()).isPresent());
      DlockException.Held held =
          assertThrows(
              DlockException.Held.class, () -> session.lock("payouts/1", LockOptions.defaults()));
      assertTrue(held.getMessage().contains("payouts/1"), held.getMessage());
      assertFalse(held.getMessage().contains("backend down"), held.getMessage());
    }
  }

  /** 401 and 403 are answers, not outages: sent once. */
  @Test
  void authenticationErrorsAreNotRetried() throws Exception {
    try (FakeServer server = answering(401, "unauthenticated");
        Session session = server.client(0.01).session()) {
      int before = server.requests.size();
      assertThrows(DlockException.Unauthenticated.class,
          () -> session.acquire("k", LockOptions.defaults()));
      assertEquals(before + 1, server.requests.size());
    }
  }

  /** 429 is retried on the same server, then resource exhausted. */
  @Test
  void tooManyRequestsIsRetriedThenExhausted() throws Exception {
    try (FakeServer server = answering(429, "too_many_requests");
        Session session = server.client(0.01).session()) {
      assertThrows(DlockException.ResourceExhausted.class,
          () -> session.acquire("k", LockOptions.defaults()));
      assertTrue(server.requests.stream().filter(r -> r.contains("/acquire")).count() > 1);
    }
  }

  /** Tokens are read as the CLI reads them, and never shown in an error. */
  @Test
  void tokensFromOptionFileAndEnvironment() throws Exception {
    java.nio.file.Path file = java.nio.file.Files.createTempFile("token", "");
    try {
      java.nio.file.Files.writeString(file, "dlk_fromfile\nsecond line\n");
      assertEquals("dlk_opt", Core.resolveToken("dlk_opt", file.toString(), java.util.Map.of()));
      assertEquals("dlk_fromfile", Core.resolveToken(null, file.toString(), java.util.Map.of()));
      assertEquals("dlk_env",
          Core.resolveToken(null, null, java.util.Map.of("DLOCK_TOKEN", "dlk_env")));
      assertEquals("dlk_fromfile",
          Core.resolveToken(null, null, java.util.Map.of("DLOCK_TOKEN_FILE", file.toString())));
      assertEquals("", Core.resolveToken(null, null, java.util.Map.of()));
      DlockException bad =
          assertThrows(DlockException.InvalidArgument.class,
              () -> Core.resolveToken("not a token!", null, java.util.Map.of()));
      assertFalse(bad.getMessage().contains("not a token!"));
    } finally {
      java.nio.file.Files.delete(file);
    }
  }
}
