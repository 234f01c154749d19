#include "server/request_context.h"

#include "server/input_checks.h"

namespace dlock::server {

std::optional<std::string> RequestContext::query(std::string_view name) const {
  const auto found = url.params().find(name);
  if (found == url.params().end()) return std::nullopt;
  return std::string((*found).value);
}

std::string RequestContext::query_namespace() const {
  return checked_namespace(query("ns").value_or("default"));
}

}  // namespace dlock::server
