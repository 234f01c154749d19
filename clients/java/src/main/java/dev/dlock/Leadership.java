package dev.dlock;

import java.util.Map;

/**
 * The leadership of an election: a session-bound exclusive grant that carries a value. Fence the
 * leader's writes with {@link #token()}. {@link #close()} resigns.
 */
public final class Leadership extends Lock {
  private volatile String value;

  Leadership(Session session, String name, String ns, Map<String, Object> answer, long sentAt,
      String value) {
    super(session, name, ns, answer, sentAt, 0, LockOptions.Mode.EXCLUSIVE, false, null);
    this.value = value;
  }

  public String name() {
    return key();
  }

  /** The value this leader announces. */
  public String value() {
    return value;
  }

  /** A new value without a new election: the token stays. LockLost when no longer leading. */
  public void proclaim(String newValue) {
    if (released) {
      throw new DlockException.LockLost("proclaim " + key() + ": resigned", 0);
    }
    try {
      core.proclaim(key(), session.id(), token(), newValue, ns, core.callFor());
    } catch (DlockException.LockLost | DlockException.SessionNotFound error) {
      gone = true;
      markLost("leadership lost: " + error.getMessage());
      throw new DlockException.LockLost(error.getMessage(), error.status());
    }
    value = newValue;
  }

  /** Resigns: the next campaigner is elected with a greater token. */
  public void resign() {
    release();
  }

  @Override
  public void release() {
    if (released) {
      return;
    }
    released = true;
    session.locks.remove(this);
    if (gone || session.gone) {
      throw new DlockException.LockLost("resign " + key() + ": " + lostReason(), 0);
    }
    if (session.closed) {
      return;
    }
    core.resign(key(), session.id(), token(), ns, core.callFor(core.requestTimeout, null));
  }
}
