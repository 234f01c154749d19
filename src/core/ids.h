#pragma once

#include <string>

namespace dlock::core {

// A fresh 128-bit random identifier as 32 lowercase hex digits (sessions of the embedded store).
std::string random_id();

}  // namespace dlock::core
