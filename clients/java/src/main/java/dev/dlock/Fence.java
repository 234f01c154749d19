package dev.dlock;

import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;

/**
 * The fencing guard for a PostgreSQL resource, over the user's own JDBC connection: thin calls of
 * the SQL functions the project ships (src/fencing/fencing_guard.sql; docs/fencing.md). The
 * driver is the caller's; this client depends on {@code java.sql} alone.
 *
 * <pre>{@code
 * db.setAutoCommit(false);
 * if (Fence.admit(db, "ledger/acct-9", lock.token(), lock.key())) {
 *   ... the fenced write, on db ...
 *   db.commit();
 * } else {
 *   db.rollback(); // stale: a greater token was accepted; do not write
 * }
 * }</pre>
 */
public final class Fence {
  private Fence() {}

  /** SQLSTATE DL001: the resource is bound to another lock key (configuration, not a decision). */
  public static final class BoundToAnotherKeyException extends SQLException {
    private static final long serialVersionUID = 1L;

    BoundToAnotherKeyException(SQLException cause) {
      super(cause.getMessage(), "DL001", cause);
    }
  }

  /** SQLSTATE DL002: an empty resource or key, or a token below 1. */
  public static final class BadArgumentException extends SQLException {
    private static final long serialVersionUID = 1L;

    BadArgumentException(SQLException cause) {
      super(cause.getMessage(), "DL002", cause);
    }
  }

  /**
   * Whether a writer holding {@code token} of {@code lockKey} may write {@code resource}: call it
   * inside the transaction that makes the write (auto-commit off), then write and commit. True:
   * admitted, the resource's row stays locked until the transaction ends. False: stale, roll
   * back and do not write. A DL001/DL002 error rolls the transaction back and is thrown typed.
   */
  public static boolean admit(Connection tx, String resource, long token, String lockKey)
      throws SQLException {
    return decide(tx, "dlock_fence_admit", resource, token, lockKey);
  }

  /** {@link #admit} for a reader of a read-write lock (readers are not ordered among them). */
  public static boolean admitRead(Connection tx, String resource, long token, String lockKey)
      throws SQLException {
    return decide(tx, "dlock_fence_admit_read", resource, token, lockKey);
  }

  /** Binds {@code resource} to {@code lockKey} ahead of its first write. Idempotent. */
  public static void bind(Connection db, String resource, String lockKey) throws SQLException {
    // Typed parameters: a driver sending strings as varchar still finds the text functions.
    String sql = "SELECT dlock_fence_bind(CAST(? AS text), CAST(? AS text))";
    try (CallableStatement call = db.prepareCall(sql)) {
      call.setString(1, resource);
      call.setString(2, lockKey);
      call.execute();
    } catch (SQLException error) {
      throw typed(db, error);
    }
  }

  private static boolean decide(Connection tx, String function, String resource, long token,
      String lockKey) throws SQLException {
    String sql = "SELECT " + function + "(CAST(? AS text), CAST(? AS bigint), CAST(? AS text))";
    if (tx.getAutoCommit()) {
      // The row lock would end with the statement: the write would not be fenced.
      throw new SQLException(
          "dlock fence: call admit inside the transaction of the write (setAutoCommit(false))",
          "25000");
    }
    try (PreparedStatement statement = tx.prepareStatement(sql)) {
      statement.setString(1, resource);
      statement.setLong(2, token);
      statement.setString(3, lockKey);
      try (ResultSet row = statement.executeQuery()) {
        return row.next() && row.getBoolean(1);
      }
    } catch (SQLException error) {
      throw typed(tx, error);
    }
  }

  private static SQLException typed(Connection db, SQLException error) throws SQLException {
    String state = error.getSQLState();
    if (!"DL001".equals(state) && !"DL002".equals(state)) {
      return error;
    }
    if (!db.getAutoCommit()) {
      db.rollback(); // the transaction is aborted anyway: end it
    }
    return "DL001".equals(state) ? new BoundToAnotherKeyException(error)
        : new BadArgumentException(error);
  }
}
