#pragma once

// Client options for tests against the fake server: short timeouts and a fast backoff.

#include <chrono>
#include <string>

#include "dlock/client.h"

namespace dlock::client::testing {

inline ClientOptions fast_options(const std::string& url) {
  ClientOptions options;
  options.server_url = url;
  options.request_timeout = std::chrono::milliseconds(2000);
  options.retry_budget = std::chrono::milliseconds(2000);
  options.backoff_initial = std::chrono::milliseconds(5);
  options.backoff_max = std::chrono::milliseconds(20);
  return options;
}

}  // namespace dlock::client::testing
