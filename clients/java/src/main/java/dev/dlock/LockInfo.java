package dev.dlock;

import java.util.Map;
import java.util.Optional;

/** A live holder of a key, as {@code GET /v1/locks/{key}} shows it. */
public final class LockInfo {
  private final Map<String, Object> o;

  LockInfo(Map<String, Object> o) {
    this.o = o;
  }

  public String key() {
    return Json.str(o, "key", "");
  }

  public long fencingToken() {
    return Json.num(o, "fencing_token", 0);
  }

  public String owner() {
    return Json.str(o, "owner", "");
  }

  /** {@code exclusive}, {@code shared} or {@code permit}. */
  public String mode() {
    return Json.str(o, "mode", "exclusive");
  }

  /** {@code ttl} or {@code session}. */
  public String lease() {
    return Json.str(o, "lease", "ttl");
  }

  public String acquiredAt() {
    return Json.str(o, "acquired_at", "");
  }

  public String expiresAt() {
    return Json.str(o, "expires_at", "");
  }

  /** Shown to its own principal and admins only (C6). */
  public Optional<String> sessionId() {
    return Optional.ofNullable(Json.str(o, "session_id", null));
  }

  @Override
  public String toString() {
    return "LockInfo" + o;
  }
}
