// Fuzz target (c): dlockd's configuration (src/server/config.h, contract C5). The input is split
// at NUL bytes: the first part is the --config file's text, the others are command-line
// arguments. Any input configures, or stops with ConfigError (an InvalidArgumentError).

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/errors.h"
#include "server/config.h"

namespace {

// One scratch file per process, rewritten for every input and removed at exit.
struct Scratch {
  std::string path;
  Scratch() {
    char name[] = "/tmp/dlock-fuzz-config-XXXXXX";
    const int fd = mkstemp(name);
    if (fd < 0) std::abort();
    close(fd);
    path = name;
  }
  ~Scratch() { std::remove(path.c_str()); }
};

const std::string& scratch_path() {
  static const Scratch scratch;
  return scratch.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto first_nul = input.find('\0');
  const std::string_view file = input.substr(0, first_nul);
  std::vector<std::string> args{"--config", scratch_path()};
  if (first_nul != std::string_view::npos) {
    std::string_view rest = input.substr(first_nul + 1);
    while (true) {
      const auto nul = rest.find('\0');
      args.emplace_back(rest.substr(0, nul));
      if (nul == std::string_view::npos) break;
      rest.remove_prefix(nul + 1);
    }
  }
  if (std::FILE* out = std::fopen(scratch_path().c_str(), "wb")) {
    std::fwrite(file.data(), 1, file.size(), out);
    std::fclose(out);
  }
  try {
    (void)dlock::server::load_config(args);
  } catch (const dlock::InvalidArgumentError&) {
  }
  return 0;
}
