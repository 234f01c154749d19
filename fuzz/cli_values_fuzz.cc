// Fuzz target (g): the small value parsers of the command lines: parse_duration and
// parse_clock_drift (include/dlock/client.h; dlock's flags, the client options and dlockd's
// durations) and dlockd's --etcd-raise-revision-to (src/server/config.h); and the payload of
// PostgreSQL's release notifications (util::parse_release_notice). The first byte picks the
// parser. A value is accepted or rejected with InvalidArgumentError (ConfigError is one).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dlock/client.h"
#include "dlock/errors.h"
#include "server/config.h"
#include "util/release_hub.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 5) {
      case 0: {
        const auto duration = dlock::client::parse_duration(text, "ttl");
        // The shortest spelling must read back as the same duration.
        const auto again =
            dlock::client::parse_duration(dlock::client::format_duration(duration), "ttl");
        if (again != duration) __builtin_trap();
        break;
      }
      case 1: {
        const double drift = dlock::client::parse_clock_drift(text, "clock_drift");
        if (!(drift >= 0 && drift < 0.5)) __builtin_trap();
        break;
      }
      case 2: {
        const auto parsed = dlock::server::load_config({"--etcd-raise-revision-to", text});
        if (parsed.etcd_raise_revision_to <= 0) __builtin_trap();
        break;
      }
      case 3: {
        // The key is the payload up to its first tab; a token is a whole decimal number.
        const auto notice = dlock::util::parse_release_notice(text);
        if (notice.key.size() > text.size() ||
            text.compare(0, notice.key.size(), notice.key) != 0) {
          __builtin_trap();
        }
        if (notice.granted != 0 && notice.key.size() == text.size()) __builtin_trap();
        break;
      }
      default: {
        const auto parsed = dlock::server::load_config({"--etcd-raise-revision-to=" + text});
        if (parsed.etcd_raise_revision_to <= 0) __builtin_trap();
        break;
      }
    }
  } catch (const dlock::InvalidArgumentError&) {
  }
  return 0;
}
