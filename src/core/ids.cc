#include "core/ids.h"

#include <cstdint>
#include <random>

namespace dlock::core {

std::string random_id() {
  // One seeded engine per thread: ids need to be unpredictable enough not to collide, they are
  // not credentials (a session id grants nothing an owner name does not).
  thread_local std::mt19937_64 engine{[] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    std::uint64_t bits = engine();
    for (int i = 0; i < 16; ++i) {
      id[half * 16 + i] = kHex[bits & 0xF];
      bits >>= 4;
    }
  }
  return id;
}

}  // namespace dlock::core
