package dev.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The JSON parser: known cases, then random properties (a fuzz test: a failure names its seed). */
class JsonTest {
  private static final long SEED = Long.getLong("dlock.jsonSeed", System.nanoTime());

  @Test
  void readsWhatDlockdWrites() {
    Map<String, Object> o =
        Json.parseObject(
            "{\"key\":\"payouts/batch-17\",\"fencing_token\":1796541047738682,\"ttl_ms\":10000,"
                + "\"leader\":{\"value\":\"10.0.0.1:5432\"},\"holders\":[],\"x\":null,\"ok\":true,"
                + "\"f\":-1.5e3,\"s\":\"a\\\"b\\\\c\\u00e9\\n\\/\"}");
    assertEquals(1796541047738682L, o.get("fencing_token"));
    assertEquals("10.0.0.1:5432", Json.str(Json.obj(o, "leader"), "value", ""));
    assertEquals(List.of(), o.get("holders"));
    assertEquals(-1500.0, o.get("f"));
    assertEquals("a\"b\\c\u00e9\n/", o.get("s"));
    assertEquals(Boolean.TRUE, o.get("ok"));
    assertEquals(1e20, Json.parse("100000000000000000000")); // beyond long: a double
  }

  @Test
  void refusesMalformedText() {
    for (String bad :
        new String[] {"", "{", "{\"a\"}", "{\"a\":}", "[1,]", "01", "1.", "-", "\"\\x\"",
          "\"a", "tru", "{\"a\":1}x", "[\"\u0001\"]", "1e", "\"\\u12\"", "{,}", "nul"}) {
      assertThrows(IllegalArgumentException.class, () -> Json.parse(bad), bad);
    }
  }

  @Test
  void deepNestingIsRefusedNotAStackOverflow() {
    String deep = "[".repeat(100_000) + "]".repeat(100_000);
    assertThrows(IllegalArgumentException.class, () -> Json.parse(deep));
    String ok = "[".repeat(Json.MAX_DEPTH) + "]".repeat(Json.MAX_DEPTH);
    Json.parse(ok);
  }

  private static Object randomValue(Random random, int depth) {
    int kind = random.nextInt(depth > 4 ? 5 : 7);
    switch (kind) {
      case 0:
        return null;
      case 1:
        return random.nextBoolean();
      case 2:
        return random.nextLong();
      case 3:
        return random.nextInt(1000) / 8.0 - 60; // exact in binary: survives the round trip
      case 4:
        return randomString(random);
      case 5: {
        List<Object> list = new ArrayList<>();
        for (int i = random.nextInt(4); i > 0; i--) {
          list.add(randomValue(random, depth + 1));
        }
        return list;
      }
      default: {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = random.nextInt(4); i > 0; i--) {
          map.put(randomString(random), randomValue(random, depth + 1));
        }
        return map;
      }
    }
  }

  private static String randomString(Random random) {
    StringBuilder out = new StringBuilder();
    for (int i = random.nextInt(8); i > 0; i--) {
      int pick = random.nextInt(10);
      out.append(pick < 6 ? (char) ('a' + random.nextInt(26))
          : pick < 8 ? "\"\\/\n\t\u0000\u001f".charAt(random.nextInt(7))
          : (char) random.nextInt(0xd800));
    }
    return out.toString();
  }

  /** Property: parse(write(v)) == v for random values. */
  @Test
  void roundTripsRandomValues() {
    Random random = new Random(SEED);
    for (int i = 0; i < 5000; i++) {
      Object value = randomValue(random, 0);
      String text = Json.write(value);
      try {
        assertEquals(value, Json.parse(text), text);
      } catch (RuntimeException failed) {
        fail("seed " + SEED + " (-Ddlock.jsonSeed): " + text, failed);
      }
    }
  }

  /**
   * Property: any text, valid or not (random bytes, valid documents cut, spliced and mutated),
   * either parses or raises IllegalArgumentException: never another exception, never a hang.
   */
  @Test
  void arbitraryTextParsesOrRaisesOnlyIllegalArgument() {
    Random random = new Random(SEED);
    String alphabet = "{}[]:,\"\\/-+.0123456789eEtruefalsn \n\tu\u00e9";
    for (int i = 0; i < 20_000; i++) {
      String text;
      if (random.nextBoolean()) {
        StringBuilder out = new StringBuilder();
        for (int n = random.nextInt(40); n > 0; n--) {
          out.append(alphabet.charAt(random.nextInt(alphabet.length())));
        }
        text = out.toString();
      } else {
        StringBuilder out = new StringBuilder(Json.write(randomValue(random, 0)));
        for (int n = random.nextInt(4); n > 0 && out.length() > 0; n--) {
          int at = random.nextInt(out.length());
          switch (random.nextInt(3)) {
            case 0:
              out.deleteCharAt(at);
              break;
            case 1:
              out.insert(at, alphabet.charAt(random.nextInt(alphabet.length())));
              break;
            default:
              out.setLength(at);
          }
        }
        text = out.toString();
      }
      try {
        Json.parse(text);
      } catch (IllegalArgumentException refused) {
        // the one way to refuse
      } catch (RuntimeException | StackOverflowError other) {
        fail("seed " + SEED + " (-Ddlock.jsonSeed): " + text + " raised " + other, other);
      }
    }
  }
}
