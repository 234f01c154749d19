package dev.dlock;

import java.util.List;

/** A semaphore: the limit its holders agreed on (0 while none holds a permit) and the holders. */
public final class SemaphoreInfo {
  private final String name;
  private final long limit;
  private final List<LockInfo> holders;

  SemaphoreInfo(String name, long limit, List<LockInfo> holders) {
    this.name = name;
    this.limit = limit;
    this.holders = List.copyOf(holders);
  }

  public String name() {
    return name;
  }

  public long limit() {
    return limit;
  }

  public List<LockInfo> holders() {
    return holders;
  }
}
