#pragma once

#include <cstddef>

#include "client/tls_context.h"
#include "client/transport.h"
#include "client/url.h"

namespace dlock::client::detail {

// HTTP/1.1 with keep-alive over Boost.Beast. Calls block the calling thread; a small pool of
// idle connections lets concurrent callers each use their own. A request sent on a pooled
// connection that the server had already closed is re-sent once on a fresh connection. An https://
// address (address.tls) needs `tls`: each connection then verifies the server's certificate and
// its name (the URL's host: DNS name or IP address; SNI for DNS names) before any request.
TransportPtr make_beast_transport(ServerAddress address, std::size_t max_idle_connections,
                                  TlsContextPtr tls = nullptr);

}  // namespace dlock::client::detail
