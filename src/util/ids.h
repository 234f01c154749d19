#pragma once

#include <string>

namespace dlock::util {

// A fresh 128-bit identifier from the kernel CSPRNG as 32 lowercase hex digits (session IDs of
// the embedded store; they are credentials, contract C6). Throws InternalError if the kernel
// cannot supply randomness.
std::string random_id();

}  // namespace dlock::util
