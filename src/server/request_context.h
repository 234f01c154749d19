#pragma once

// What a handler knows about its request (api.cc dispatches, authorization.cc checks it): its own
// header, so that the authorization layer does not include the whole Api.

#include <boost/url/url_view.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/token_table.h"
#include "core/cancellation.h"
#include "dlock/types.h"
#include "server/http_server.h"

namespace dlock::server {

// What a handler knows about its request. Lives for the synchronous part of the dispatch only:
// a handler copies what its service callback needs.
struct RequestContext {
  const Request& request;
  boost::urls::url_view url;        // a view into request.target()
  std::vector<std::string> params;  // the path segments matched by "{}", in order, decoded
  std::string_view body;
  std::string remote_address;        // the peer's IP (no port): throttle key, audit events (C6)
  SteadyClock::time_point received;  // before any store call (honoured_ttl counts from here)
  // Who sent a /v1 request (contract C6); null when authentication is off.
  std::shared_ptr<const auth::Principal> principal;
  // mTLS: the CN of the verified client certificate (Peer::client_cert_cn, http_server.h).
  std::optional<std::string> client_cert_cn;
  // The request's tie to its connection (Peer::cancellation, http_server.h); may be null.
  core::CancellationPtr cancellation;

  // The first value of query parameter `name`, decoded.
  std::optional<std::string> query(std::string_view name) const;
  // The `ns` query parameter, checked; "default" when absent.
  std::string query_namespace() const;
};

}  // namespace dlock::server
