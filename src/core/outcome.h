#pragma once

#include <exception>
#include <optional>

namespace dlock::core {

// Either a value or the exception a store call threw.
template <typename T>
struct Outcome {
  std::optional<T> value;
  std::exception_ptr error;
};

}  // namespace dlock::core
