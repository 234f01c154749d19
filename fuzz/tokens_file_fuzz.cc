// Fuzz target (d): the tokens file parser (src/auth/tokens_file.h, contract C6). Any text either
// parses to a table or throws TokensFileError, whose message never quotes a hash field.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "auth/tokens_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto table = dlock::auth::parse_tokens(text, "tokens");
    (void)table;
  } catch (const dlock::auth::TokensFileError&) {
  }
  return 0;
}
