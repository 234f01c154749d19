package dev.dlock;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The small JSON reader and writer the client needs (RFC 8259; the JDK has none). Objects read
 * as {@code Map<String, Object>} (insertion order), arrays as {@code List<Object>}, numbers as
 * {@code Long} when integral and in range, else {@code Double}, plus {@code String},
 * {@code Boolean} and {@code null}. Malformed input raises {@link IllegalArgumentException},
 * never anything else; nesting is limited so hostile input cannot exhaust the stack.
 */
public final class Json {
  /** The deepest nesting of arrays and objects {@link #parse} accepts. */
  public static final int MAX_DEPTH = 64;

  private final String text;
  private int at;

  private Json(String text) {
    this.text = text;
  }

  /** The value {@code text} holds, with nothing but whitespace after it. */
  public static Object parse(String text) {
    Json reader = new Json(text);
    reader.skipSpace();
    Object value = reader.value(0);
    reader.skipSpace();
    if (reader.at != text.length()) {
      throw reader.error("unexpected text after the value");
    }
    return value;
  }

  /** The object {@code text} holds; {@link IllegalArgumentException} when it is not one. */
  @SuppressWarnings("unchecked")
  public static Map<String, Object> parseObject(String text) {
    Object value = parse(text);
    if (!(value instanceof Map)) {
      throw new IllegalArgumentException("JSON: not an object");
    }
    return (Map<String, Object>) value;
  }

  private IllegalArgumentException error(String what) {
    return new IllegalArgumentException("JSON: " + what + " at offset " + at);
  }

  private void skipSpace() {
    while (at < text.length()) {
      char c = text.charAt(at);
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        return;
      }
      at++;
    }
  }

  private Object value(int depth) {
    if (at >= text.length()) {
      throw error("unexpected end");
    }
    char c = text.charAt(at);
    switch (c) {
      case '{':
        return object(depth + 1);
      case '[':
        return array(depth + 1);
      case '"':
        return string();
      case 't':
        return literal("true", Boolean.TRUE);
      case 'f':
        return literal("false", Boolean.FALSE);
      case 'n':
        return literal("null", null);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          return number();
        }
        throw error("unexpected character");
    }
  }

  private Object literal(String word, Object value) {
    if (!text.startsWith(word, at)) {
      throw error("unexpected character");
    }
    at += word.length();
    return value;
  }

  private Map<String, Object> object(int depth) {
    if (depth > MAX_DEPTH) {
      throw error("nested too deeply");
    }
    at++; // {
    Map<String, Object> map = new LinkedHashMap<>();
    skipSpace();
    if (at < text.length() && text.charAt(at) == '}') {
      at++;
      return map;
    }
    while (true) {
      skipSpace();
      if (at >= text.length() || text.charAt(at) != '"') {
        throw error("expected a member name");
      }
      String name = string();
      skipSpace();
      expect(':');
      skipSpace();
      map.put(name, value(depth));
      skipSpace();
      if (at < text.length() && text.charAt(at) == ',') {
        at++;
        continue;
      }
      expect('}');
      return map;
    }
  }

  private List<Object> array(int depth) {
    if (depth > MAX_DEPTH) {
      throw error("nested too deeply");
    }
    at++; // [
    List<Object> list = new ArrayList<>();
    skipSpace();
    if (at < text.length() && text.charAt(at) == ']') {
      at++;
      return list;
    }
    while (true) {
      skipSpace();
      list.add(value(depth));
      skipSpace();
      if (at < text.length() && text.charAt(at) == ',') {
        at++;
        continue;
      }
      expect(']');
      return list;
    }
  }

  private void expect(char c) {
    if (at >= text.length() || text.charAt(at) != c) {
      throw error("expected '" + c + "'");
    }
    at++;
  }

  private String string() {
    at++; // "
    StringBuilder out = new StringBuilder();
    while (true) {
      if (at >= text.length()) {
        throw error("unterminated string");
      }
      char c = text.charAt(at++);
      if (c == '"') {
        return out.toString();
      }
      if (c < 0x20) {
        throw error("control character in a string");
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (at >= text.length()) {
        throw error("unterminated escape");
      }
      char e = text.charAt(at++);
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.append(e);
          break;
        case 'b':
          out.append('\b');
          break;
        case 'f':
          out.append('\f');
          break;
        case 'n':
          out.append('\n');
          break;
        case 'r':
          out.append('\r');
          break;
        case 't':
          out.append('\t');
          break;
        case 'u':
          if (at + 4 > text.length()) {
            throw error("short \\u escape");
          }
          int code = 0;
          for (int i = 0; i < 4; i++) {
            int digit = Character.digit(text.charAt(at++), 16);
            if (digit < 0) {
              throw error("bad \\u escape");
            }
            code = code * 16 + digit;
          }
          out.append((char) code);
          break;
        default:
          throw error("bad escape");
      }
    }
  }

  private Object number() {
    int start = at;
    if (text.charAt(at) == '-') {
      at++;
    }
    if (at < text.length() && text.charAt(at) == '0') {
      at++;
    } else if (!digits()) {
      throw error("bad number");
    }
    boolean integral = true;
    if (at < text.length() && text.charAt(at) == '.') {
      at++;
      integral = false;
      if (!digits()) {
        throw error("bad number");
      }
    }
    if (at < text.length() && (text.charAt(at) == 'e' || text.charAt(at) == 'E')) {
      at++;
      integral = false;
      if (at < text.length() && (text.charAt(at) == '+' || text.charAt(at) == '-')) {
        at++;
      }
      if (!digits()) {
        throw error("bad number");
      }
    }
    String number = text.substring(start, at);
    if (integral) {
      try {
        return Long.parseLong(number);
      } catch (NumberFormatException tooLarge) {
        // falls through: a double
      }
    }
    return Double.parseDouble(number);
  }

  private boolean digits() {
    int start = at;
    while (at < text.length() && text.charAt(at) >= '0' && text.charAt(at) <= '9') {
      at++;
    }
    return at > start;
  }

  /** The JSON text of {@code value} (a map, list, string, number, boolean or null). */
  public static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(out, value);
    return out.toString();
  }

  private static void write(StringBuilder out, Object value) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String) {
      quote(out, (String) value);
    } else if (value instanceof Boolean || value instanceof Long || value instanceof Integer) {
      out.append(value);
    } else if (value instanceof Number) {
      double number = ((Number) value).doubleValue();
      if (!Double.isFinite(number)) {
        throw new IllegalArgumentException("JSON: a number must be finite");
      }
      out.append(number);
    } else if (value instanceof Map) {
      out.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
        if (!first) {
          out.append(',');
        }
        first = false;
        quote(out, String.valueOf(entry.getKey()));
        out.append(':');
        write(out, entry.getValue());
      }
      out.append('}');
    } else if (value instanceof List) {
      out.append('[');
      boolean first = true;
      for (Object item : (List<?>) value) {
        if (!first) {
          out.append(',');
        }
        first = false;
        write(out, item);
      }
      out.append(']');
    } else {
      throw new IllegalArgumentException("JSON: cannot write a " + value.getClass().getName());
    }
  }

  private static void quote(StringBuilder out, String text) {
    out.append('"');
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      switch (c) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\r':
          out.append("\\r");
          break;
        case '\t':
          out.append("\\t");
          break;
        default:
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
      }
    }
    out.append('"');
  }

  // --- typed reads of a decoded object ---------------------------------------------------

  static String str(Map<String, Object> o, String name, String fallback) {
    Object v = o.get(name);
    return v instanceof String ? (String) v : fallback;
  }

  static long num(Map<String, Object> o, String name, long fallback) {
    Object v = o.get(name);
    if (v instanceof Long) {
      return (Long) v;
    }
    return fallback;
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> obj(Map<String, Object> o, String name) {
    Object v = o.get(name);
    return v instanceof Map ? (Map<String, Object>) v : Map.of();
  }

  @SuppressWarnings("unchecked")
  static List<Map<String, Object>> objects(Map<String, Object> o, String name) {
    Object v = o.get(name);
    List<Map<String, Object>> out = new ArrayList<>();
    if (v instanceof List) {
      for (Object item : (List<Object>) v) {
        if (item instanceof Map) {
          out.add((Map<String, Object>) item);
        }
      }
    }
    return out;
  }
}
