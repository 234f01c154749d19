#include "util/ids.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "dlock/errors.h"

namespace dlock::util {

std::string random_id() {
  // Session IDs are credentials (contract C6, ADR-0016): whoever knows one can act for the
  // session, so they come from the kernel's CSPRNG (getrandom(2)), never from a seeded PRNG
  // whose state a few outputs would reveal. 128 bits, unguessable.
  std::array<unsigned char, 16> bytes{};
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw InternalError(std::string("getrandom failed: ") + std::strerror(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  id.reserve(bytes.size() * 2);
  for (const unsigned char byte : bytes) {
    id.push_back(kHex[byte >> 4]);
    id.push_back(kHex[byte & 0xF]);
  }
  return id;
}

}  // namespace dlock::util
