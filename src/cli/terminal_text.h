#pragma once

// Text for a terminal: every string the CLI prints in its human-readable form (keys, owners,
// session ids, election values, error messages: mostly server-supplied) goes through
// printable(), so that a value cannot move the cursor, clear the screen, retitle the window or
// make a line look like another (docs/cli.md, "Output"). --json output is not escaped: JSON
// escapes control characters itself and scripts get the exact values.

#include <string>
#include <string_view>

namespace dlock::cli {

// `text` with what a terminal would act on shown as escapes, and valid UTF-8 text otherwise
// kept as it is:
// - C0 controls (0x00-0x1f, including \t \r \n and ESC) and DEL: \x1b style (two hex digits);
// - C1 controls (U+0080-U+009F) and the invisible characters that reorder or break lines
//   (U+061C, U+200E, U+200F, U+2028-U+202E, U+2066-U+2069): \u009b style (four hex digits);
// - a byte that is not part of valid UTF-8 (e.g. a lone 0x9b, CSI to an 8-bit terminal):
//   \x9b style;
// - the backslash: \\ (so that an escape in the output always stands for a character).
std::string printable(std::string_view text);

}  // namespace dlock::cli
