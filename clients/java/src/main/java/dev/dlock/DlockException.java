package dev.dlock;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Optional;

/**
 * Every error this client raises: one subclass per error code of dlockd's HTTP API (contract C3).
 *
 * <p>"Held" is a decision, not a failure: {@link Session#acquire} returns an empty
 * {@code Optional} for it, and only the forms that have no value to return ({@link
 * Session#lock}, {@link Client#lock}) throw {@link Held}. A server or backend that cannot answer
 * is always {@link Unavailable} (or one of its subclasses), never {@link Held}.
 */
public class DlockException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String field;
  private final int status;

  DlockException(String message, String field, int status) {
    super(message);
    this.field = field;
    this.status = status;
  }

  /** The C3 wire code (or {@code tls}, {@code cancelled}, {@code unknown_outcome}). */
  public String code() {
    return "internal";
  }

  /** The request field the server named as wrong, if any. */
  public Optional<String> field() {
    return Optional.ofNullable(field);
  }

  /** The HTTP status that answered, 0 when none did. */
  public int status() {
    return status;
  }

  /** Whether the same call may succeed later (an outage, a limit). */
  public boolean retryable() {
    return false;
  }

  /** 400 {@code invalid_argument} or 413 {@code payload_too_large}; {@link #field} names it. */
  public static class InvalidArgument extends DlockException {
    private static final long serialVersionUID = 1L;

    InvalidArgument(String message, String field, int status) {
      super(message, field, status);
    }

    @Override
    public String code() {
      return "invalid_argument";
    }
  }

  /** The TLS handshake failed (server not verified, client certificate refused): configuration. */
  public static final class Tls extends InvalidArgument {
    private static final long serialVersionUID = 1L;

    Tls(String message) {
      super(message, "tls", 0);
    }

    @Override
    public String code() {
      return "tls";
    }
  }

  /** 401: the bearer token is missing or unknown. Never retried. */
  public static final class Unauthenticated extends DlockException {
    private static final long serialVersionUID = 1L;

    Unauthenticated(String message, int status) {
      super(message, null, status);
    }

    @Override
    public String code() {
      return "unauthenticated";
    }
  }

  /** 403: the principal lacks the role. Never retried. */
  public static final class PermissionDenied extends DlockException {
    private static final long serialVersionUID = 1L;

    PermissionDenied(String message, int status) {
      super(message, null, status);
    }

    @Override
    public String code() {
      return "permission_denied";
    }
  }

  /** 404 {@code session_not_found}: the session expired or was closed; it is never revived. */
  public static final class SessionNotFound extends DlockException {
    private static final long serialVersionUID = 1L;

    SessionNotFound(String message, int status) {
      super(message, null, status);
    }

    @Override
    public String code() {
      return "session_not_found";
    }
  }

  /** 409 {@code lock_lost}, or a lock past its client deadline: stop acting on it. */
  public static final class LockLost extends DlockException {
    private static final long serialVersionUID = 1L;

    LockLost(String message, int status) {
      super(message, null, status);
    }

    @Override
    public String code() {
      return "lock_lost";
    }
  }

  /**
   * Not granted within the wait (409 {@code held}). The message names the key and never a holder
   * (the client does not know one); {@link #delayedUntil} is set when a lock-delay is why.
   */
  public static final class Held extends DlockException {
    private static final long serialVersionUID = 1L;

    private final String key;
    private final String delayedUntil;

    Held(String key, double waitedSeconds, String delayedUntil) {
      super(message(key, waitedSeconds, delayedUntil), null, 409);
      this.key = key;
      this.delayedUntil = delayedUntil;
    }

    private static String message(String key, double waited, String delayedUntil) {
      String after = waited > 0 ? String.format(" after waiting %.3g s", waited) : "";
      if (delayedUntil != null) {
        return key + " is kept ungranted by a lock-delay until " + delayedUntil + after;
      }
      return key + " is held by another session" + after;
    }

    @Override
    public String code() {
      return "held";
    }

    public String key() {
      return key;
    }

    /** The end of the lock-delay that kept the key ungranted (RFC 3339, the backend's clock). */
    public Optional<String> delayedUntil() {
      return Optional.ofNullable(delayedUntil);
    }
  }

  /** 409 {@code conflict}: a semaphore's limit differs from the one its holders agreed on. */
  public static final class Conflict extends DlockException {
    private static final long serialVersionUID = 1L;

    Conflict(String message, String field, int status) {
      super(message, field, status);
    }

    @Override
    public String code() {
      return "conflict";
    }
  }

  /** 429 after retries: a server limit or its bad-token throttle. */
  public static final class ResourceExhausted extends DlockException {
    private static final long serialVersionUID = 1L;

    ResourceExhausted(String message, int status) {
      super(message, null, status);
    }

    @Override
    public String code() {
      return "too_many_requests";
    }

    @Override
    public boolean retryable() {
      return true;
    }
  }

  /** 502/503/504 or no server reachable, after retries on every server. Never "held". */
  public static class Unavailable extends DlockException {
    private static final long serialVersionUID = 1L;

    Unavailable(String message, int status) {
      super(message, null, status);
    }

    @Override
    public String code() {
      return "unavailable";
    }

    @Override
    public boolean retryable() {
      return true;
    }
  }

  /** 503 {@code not_leader}: the backend has no leader (etcd), after retries. */
  public static final class NotLeader extends Unavailable {
    private static final long serialVersionUID = 1L;

    NotLeader(String message, int status) {
      super(message, status);
    }

    @Override
    public String code() {
      return "not_leader";
    }
  }

  /** The connection was lost after the request was sent: it may or may not have been applied. */
  public static final class UnknownOutcome extends Unavailable {
    private static final long serialVersionUID = 1L;

    UnknownOutcome(String message) {
      super(message, 0);
    }

    @Override
    public String code() {
      return "unknown_outcome";
    }
  }

  /** The caller cancelled the call (a cancelled future, a closed session) before it ended. */
  public static final class Cancelled extends DlockException {
    private static final long serialVersionUID = 1L;

    Cancelled(String message) {
      super(message, null, 0);
    }

    @Override
    public String code() {
      return "cancelled";
    }
  }

  /** 500, or an answer this client cannot read. */
  public static final class Internal extends DlockException {
    private static final long serialVersionUID = 1L;

    Internal(String message, int status) {
      super(message, null, status);
    }
  }

  // --- mapping an answer to its error ------------------------------------------------------

  /** The {@code error} object of a C3 error body; empty when the body is not one. */
  static Map<String, Object> errorObject(byte[] body) {
    try {
      return Json.obj(Json.parseObject(new String(body, StandardCharsets.UTF_8)), "error");
    } catch (IllegalArgumentException notJson) {
      return Map.of();
    }
  }

  /** The typed error for an answer that is not the route's success. */
  static DlockException fromResponse(int status, byte[] body, String what, String key) {
    Map<String, Object> error = errorObject(body);
    String code = Json.str(error, "code", "");
    String message = Json.str(error, "message", "");
    String field = Json.str(error, "field", null);
    if (message.isEmpty()) {
      // A hint of what answered (a proxy, a wrong port) without flooding the message.
      String text = new String(body, 0, Math.min(body.length, 200), StandardCharsets.UTF_8);
      message = "HTTP " + status + (text.isEmpty() ? "" : ": " + text);
    }
    String full = what + ": " + message;
    switch (code) {
      case "held":
        return new Held(key.isEmpty() ? what : key, 0, Json.str(error, "delayed_until", null));
      case "invalid_argument":
      case "payload_too_large":
      case "not_found":
      case "method_not_allowed":
        return new InvalidArgument(full, orDefault(field, status), status);
      case "unauthenticated":
      case "unauthorized":
        return unauthenticated(full, status);
      case "permission_denied":
      case "forbidden":
        return new PermissionDenied(full, status);
      case "session_not_found":
        return new SessionNotFound(full, status);
      case "lock_lost":
      case "lock_not_found":
        return new LockLost(full, status);
      case "conflict":
        return new Conflict(full, orDefault(field, status), status);
      case "too_many_requests":
        return new ResourceExhausted(full, status);
      case "unavailable":
        return new Unavailable(full, status);
      case "not_leader":
        return new NotLeader(full, status);
      case "internal":
        return new Internal(full, status);
      default:
        break;
    }
    switch (status) {
      case 400:
      case 413:
        return new InvalidArgument(full, orDefault(field, status), status);
      case 401:
        return unauthenticated(full, status);
      case 403:
        return new PermissionDenied(full, status);
      case 429:
        return new ResourceExhausted(full, status);
      case 502:
      case 503:
      case 504:
        return new Unavailable(full, status);
      default:
        if (status >= 400 && status < 500) {
          return new InvalidArgument(full, orDefault(field, status), status);
        }
        return new Internal(full, status);
    }
  }

  private static Unauthenticated unauthenticated(String message, int status) {
    return new Unauthenticated(
        message + " (a bearer token is missing or unknown: see DLOCK_TOKEN)", status);
  }

  private static String orDefault(String field, int status) {
    if (field != null) {
      return field;
    }
    return status == 413 ? "body" : "request";
  }
}
