#include "cli/terminal_text.h"

#include <cstddef>
#include <cstdint>

namespace dlock::cli {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_byte_escape(std::string& out, unsigned char byte) {
  out += "\\x";
  out += kHex[byte >> 4];
  out += kHex[byte & 0xf];
}

void append_code_point_escape(std::string& out, std::uint32_t code_point) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(code_point >> shift) & 0xf];
}

bool continuation(unsigned char byte) { return (byte & 0xc0) == 0x80; }

// The length of the valid UTF-8 sequence starting at text[at] (a byte >= 0x80) and its code
// point, or 0 when it is not one: overlong forms, surrogates and code points past U+10FFFF are
// invalid (RFC 3629).
std::size_t decode(std::string_view text, std::size_t at, std::uint32_t& code_point) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    code_point = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    code_point = lead & 0x0f;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    code_point = lead & 0x07;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // past U+10FFFF
  } else {
    return 0;
  }
  if (at + length > text.size() || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if (!continuation(byte(i))) return 0;
    code_point = (code_point << 6) | (byte(i) & 0x3f);
  }
  return length;
}

// Code points a terminal acts on or does not show: C1 controls, and the bidirectional and line
// separator formatting characters that make text display in another order or on another line.
bool hidden(std::uint32_t code_point) {
  return (code_point >= 0x80 && code_point <= 0x9f) || code_point == 0x61c ||
         code_point == 0x200e || code_point == 0x200f ||
         (code_point >= 0x2028 && code_point <= 0x202e) ||
         (code_point >= 0x2066 && code_point <= 0x2069);
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto byte = static_cast<unsigned char>(text[at]);
    if (byte < 0x80) {
      if (byte < 0x20 || byte == 0x7f) {
        append_byte_escape(out, byte);
      } else if (byte == '\\') {
        out += "\\\\";
      } else {
        out += static_cast<char>(byte);
      }
      ++at;
      continue;
    }
    std::uint32_t code_point = 0;
    const std::size_t length = decode(text, at, code_point);
    if (length == 0) {
      append_byte_escape(out, byte);
      ++at;
    } else {
      if (hidden(code_point)) {
        append_code_point_escape(out, code_point);
      } else {
        out.append(text.substr(at, length));
      }
      at += length;
    }
  }
  return out;
}

}  // namespace dlock::cli
