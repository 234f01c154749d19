package dev.dlock;

import java.util.Map;

/** The leader of an election, as {@code GET /v1/elections/{name}} shows it. */
public final class LeaderInfo {
  private final String name;
  private final Map<String, Object> o;

  LeaderInfo(String name, Map<String, Object> o) {
    this.name = name;
    this.o = o;
  }

  public String name() {
    return Json.str(o, "name", name);
  }

  public String owner() {
    return Json.str(Json.obj(o, "leader"), "owner", "");
  }

  public String value() {
    return Json.str(Json.obj(o, "leader"), "value", "");
  }

  /** The leadership's fencing token: fence the leader's writes with it. */
  public long fencingToken() {
    return Json.num(o, "fencing_token", 0);
  }

  @Override
  public String toString() {
    return "LeaderInfo" + o;
  }
}
