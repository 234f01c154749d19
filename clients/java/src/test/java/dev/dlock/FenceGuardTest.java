package dev.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link Fence} against a real PostgreSQL with the project's SQL installed from its file
 * (DLOCK_FENCE_SQL, default src/fencing/fencing_guard.sql), the driver a test dependency.
 */
@Tag("pg")
class FenceGuardTest {
  private static Postgres postgres;
  private Connection db;

  @BeforeAll
  static void install() throws Exception {
    postgres = new Postgres();
    String sql = Files.readString(Path.of(ScenarioTest.env("DLOCK_FENCE_SQL",
        "../../src/fencing/fencing_guard.sql")));
    try (Connection db = postgres.connect(); Statement statement = db.createStatement()) {
      statement.execute(sql);
      statement.execute("CREATE TABLE ledger (resource text, token bigint, amount int)");
      try (ResultSet row = statement.executeQuery(
          "SELECT count(*) FROM pg_proc WHERE proname LIKE 'dlock_fence_%'")) {
        row.next();
        assertEquals(5, row.getLong(1), "the guard's functions installed");
      }
    }
  }

  @AfterAll
  static void stop() throws Exception {
    postgres.close();
  }

  @BeforeEach
  void connect() throws SQLException {
    db = postgres.connect();
    db.setAutoCommit(false);
  }

  @org.junit.jupiter.api.AfterEach
  void disconnect() throws SQLException {
    db.close();
  }

  /** Admits, writes and commits in one transaction: the guarded write of a payout. */
  private boolean pay(String resource, long token, String key) throws SQLException {
    if (!Fence.admit(db, resource, token, key)) {
      db.rollback();
      return false;
    }
    try (Statement statement = db.createStatement()) {
      statement.execute("INSERT INTO ledger VALUES ('" + resource + "', " + token + ", 1)");
    }
    db.commit();
    return true;
  }

  private long writes(String resource) throws SQLException {
    try (Statement statement = db.createStatement();
        ResultSet row = statement.executeQuery(
            "SELECT count(*) FROM ledger WHERE resource = '" + resource + "'")) {
      row.next();
      long count = row.getLong(1);
      db.commit();
      return count;
    }
  }

  @Test
  void aStaleTokenIsRefusedAndWritesNothing() throws SQLException {
    assertTrue(pay("batch-1", 10, "payouts/batch-1"));
    assertTrue(pay("batch-1", 10, "payouts/batch-1"), "the same grant may write again");
    assertFalse(pay("batch-1", 9, "payouts/batch-1"), "an older grant is stale");
    assertTrue(pay("batch-1", 11, "payouts/batch-1"));
    assertFalse(pay("batch-1", 10, "payouts/batch-1"), "a grant overtaken is stale");
    assertEquals(3, writes("batch-1"));
  }

  @Test
  void anotherLockKeyIsAConfigurationErrorNotADecision() throws SQLException {
    Fence.bind(db, "batch-2", "payouts/batch-2");
    db.commit();
    assertThrows(Fence.BoundToAnotherKeyException.class,
        () -> Fence.admit(db, "batch-2", 1_000_000, "other/key"));
    // Rolled back by the helper: the connection goes on.
    assertTrue(pay("batch-2", 5, "payouts/batch-2"));
    assertThrows(Fence.BoundToAnotherKeyException.class,
        () -> Fence.bind(db, "batch-2", "other/key"));
  }

  @Test
  void badArgumentsAreTyped() {
    assertThrows(Fence.BadArgumentException.class, () -> Fence.admit(db, "", 1, "k"));
    assertThrows(Fence.BadArgumentException.class, () -> Fence.admit(db, "r", 0, "k"));
    assertThrows(Fence.BadArgumentException.class, () -> Fence.admit(db, "r", 1, ""));
  }

  @Test
  void aWriterMustBeAboveEveryAdmittedReader() throws SQLException {
    assertTrue(Fence.admitRead(db, "report", 20, "reports/r"));
    db.commit();
    assertTrue(Fence.admitRead(db, "report", 18, "reports/r"), "readers are not ordered");
    db.commit();
    assertFalse(pay("report", 15, "reports/r"), "a writer below a reader is stale");
    assertTrue(pay("report", 21, "reports/r"));
    assertFalse(Fence.admitRead(db, "report", 20, "reports/r"), "a reader below a writer");
    db.rollback();
  }

  @Test
  void refusesToRunOutsideATransaction() throws SQLException {
    db.setAutoCommit(true);
    SQLException error =
        assertThrows(SQLException.class, () -> Fence.admit(db, "batch-3", 1, "payouts/batch-3"));
    assertEquals("25000", error.getSQLState());
  }
}
