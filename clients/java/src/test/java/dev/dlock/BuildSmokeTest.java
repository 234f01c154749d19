package dev.dlock;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import org.junit.jupiter.api.Test;

/** Run by `run-tests.sh BUILD build`: makes Maven fetch the test runner once, online. */
class BuildSmokeTest {
  @Test
  void theClientLoads() {
    assertNotNull(LockOptions.defaults());
  }
}
