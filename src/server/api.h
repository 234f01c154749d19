#pragma once

// The /v1 HTTP/JSON surface of contract C3, plus /metrics, /healthz and /readyz. Validates
// every input (a 400 naming the field), then hands the work to the LockService.

#include <atomic>
#include <optional>
#include <string>

#include "core/lock_service.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/telemetry.h"

namespace dlock::server {

class Api {
 public:
  Api(core::LockService& service, Telemetry& telemetry, const ServerConfig& config);

  void handle(Request&& request, Reply reply);
  // /readyz answers 200 only while ready (false during start-up and shutdown).
  void set_ready(bool ready) { ready_ = ready; }

 private:
  void route(const Request& request, const Reply& reply);
  void revoke(const Request& request, const std::string& key_segment,
              const std::optional<std::string>& ns, const Reply& reply);

  core::LockService& service_;
  Telemetry& telemetry_;
  const ServerConfig& config_;
  std::atomic<bool> ready_{false};
};

}  // namespace dlock::server
