#include "store/etcd/etcd_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include "dlock/errors.h"
#include "store/etcd/etcd_keys.h"

namespace dlock::store::etcd {
namespace {

struct Endpoint {
  std::string host;
  std::string port;
};

std::string_view trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

[[noreturn]] void bad_endpoints(std::string_view endpoints, const std::string& why) {
  throw InvalidArgumentError("etcd.endpoints",
                             "etcd.endpoints '" + std::string(endpoints) + "': " + why);
}

Endpoint parse_endpoint(std::string_view endpoints, std::string_view text) {
  if (text.starts_with("https://")) {
    text.remove_prefix(8);
  } else if (text.starts_with("http://")) {
    text.remove_prefix(7);
  }
  if (!text.empty() && text.back() == '/') text.remove_suffix(1);
  std::string_view host;
  std::string_view port;
  if (text.starts_with('[')) {  // [::1]:2379
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      bad_endpoints(endpoints, "expected [address]:port in '" + std::string(text) + "'");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      bad_endpoints(endpoints, "missing port in '" + std::string(text) + "'");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  int port_number = 0;
  const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), port_number);
  if (host.empty() || ec != std::errc() || ptr != port.data() + port.size() || port_number <= 0 ||
      port_number > 65535) {
    bad_endpoints(endpoints, "bad host or port in '" + std::string(text) + "'");
  }
  return Endpoint{std::string(host), std::string(port)};
}

bool is_ipv4(const std::string& host) {
  in_addr ignored{};
  return inet_pton(AF_INET, host.c_str(), &ignored) == 1;
}

bool is_ipv6(const std::string& host) {
  in6_addr ignored{};
  return inet_pton(AF_INET6, host.c_str(), &ignored) == 1;
}

// Every address `endpoint` resolves to, as "ipv4" or "ipv6" literals.
void resolve(std::string_view endpoints, const Endpoint& endpoint, std::vector<std::string>& v4,
             std::vector<std::string>& v6) {
  if (is_ipv4(endpoint.host)) {
    v4.push_back(endpoint.host + ":" + endpoint.port);
    return;
  }
  if (is_ipv6(endpoint.host)) {
    v6.push_back("[" + endpoint.host + "]:" + endpoint.port);
    return;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(endpoint.host.c_str(), endpoint.port.c_str(), &hints, &found) != 0) {
    bad_endpoints(endpoints, "cannot resolve host '" + endpoint.host + "'");
  }
  for (addrinfo* address = found; address != nullptr; address = address->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (address->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(address->ai_addr);
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
      v4.push_back(std::string(text) + ":" + endpoint.port);
    } else if (address->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address->ai_addr);
      inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
      v6.push_back("[" + std::string(text) + "]:" + endpoint.port);
    }
  }
  freeaddrinfo(found);
}

std::string join(const char* scheme, const std::vector<std::string>& addresses) {
  std::string target(scheme);
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    if (i > 0) target.push_back(',');
    target.append(addresses[i]);
  }
  return target;
}

// Whether the endpoints are https:// (all of them) or not (none).
bool uses_tls(std::string_view endpoints) {
  std::size_t secure = 0;
  std::size_t total = 0;
  std::string_view rest = endpoints;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    if (!item.empty()) {
      ++total;
      if (item.starts_with("https://")) ++secure;
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (secure != 0 && secure != total) bad_endpoints(endpoints, "mixes http:// and https://");
  return total > 0 && secure == total;
}

std::string read_pem(std::string_view endpoints, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) bad_endpoints(endpoints, "cannot read TLS file '" + path + "'");
  return text.str();
}

}  // namespace

std::string channel_target(std::string_view endpoints) {
  uses_tls(endpoints);
  std::vector<Endpoint> parsed;
  std::string_view rest = endpoints;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    if (!item.empty()) parsed.push_back(parse_endpoint(endpoints, item));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (parsed.empty()) bad_endpoints(endpoints, "no endpoint given");
  // A single host name keeps gRPC's own DNS resolver, which re-resolves after failures.
  if (parsed.size() == 1 && !is_ipv4(parsed[0].host) && !is_ipv6(parsed[0].host)) {
    return "dns:///" + parsed[0].host + ":" + parsed[0].port;
  }
  // One target may name one address family only; IPv4 wins when a list has both.
  std::vector<std::string> v4;
  std::vector<std::string> v6;
  for (const auto& endpoint : parsed) resolve(endpoints, endpoint, v4, v6);
  if (!v4.empty()) return join("ipv4:", v4);
  if (!v6.empty()) return join("ipv6:", v6);
  bad_endpoints(endpoints, "no address found");
}

std::shared_ptr<grpc::Channel> make_channel(std::string_view endpoints, const EtcdTlsFiles& tls) {
  // While a channel reconnects, gRPC's synchronous calls fail fast and nothing polls the
  // connecting socket except the client channel's backup poller, every 5 s by default: with a
  // shorter connect timeout, a restarted etcd is never noticed. Polling every 100 ms lets the
  // store reconnect within moments. Read once, when gRPC initialises; a value set by the
  // operator wins.
  static std::once_flag backup_poll_once;
  std::call_once(backup_poll_once,
                 [] { setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "100", 0); });
  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName("round_robin");
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // Despite its name, the minimum time a connection attempt may take.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Detects a member that vanished without closing its connections (a partition, kill -9 of a
  // VM). etcd rejects pings more often than every 5 s, and pings without calls.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  const std::string target = channel_target(endpoints);
  if (!uses_tls(endpoints)) {
    if (!tls.cacert.empty() || !tls.cert.empty() || !tls.key.empty()) {
      bad_endpoints(endpoints,
                    "TLS files (etcd.cacert, etcd.cert, etcd.key) need https:// endpoints");
    }
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  }
  // The name the server's certificate must carry: the first endpoint's host (an IP address is
  // matched against the certificate's IP SANs). Without it gRPC would check the whole target.
  const std::string_view first = trim(endpoints.substr(0, endpoints.find(',')));
  args.SetSslTargetNameOverride(parse_endpoint(endpoints, first).host);
  grpc::SslCredentialsOptions ssl;
  if (!tls.cacert.empty()) ssl.pem_root_certs = read_pem(endpoints, tls.cacert);
  if (!tls.cert.empty()) ssl.pem_cert_chain = read_pem(endpoints, tls.cert);
  if (!tls.key.empty()) ssl.pem_private_key = read_pem(endpoints, tls.key);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

EtcdClient::EtcdClient(std::shared_ptr<grpc::Channel> channel,
                       std::chrono::milliseconds call_timeout, std::size_t keep_alive_streams)
    : channel_(std::move(channel)),
      call_timeout_(call_timeout),
      kv_(etcdserverpb::KV::NewStub(channel_)),
      lease_(etcdserverpb::Lease::NewStub(channel_)),
      writes_(std::make_unique<TxnBatcher>(*kv_, call_timeout_)) {
  for (std::size_t i = 0; i < std::max<std::size_t>(1, keep_alive_streams); ++i) {
    keep_alives_.push_back(std::make_unique<KeepAliveStream>(channel_, *lease_));
  }
}

// Every unary call has one shape: a context with the client's deadline, the call, and a failed
// status turned into the dlock error for `what`.
template <typename Stub, typename Request, typename Response>
Response EtcdClient::call(grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                                       Response*),
                          Stub& stub, const Request& request, std::string_view what,
                          CallKind kind) const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + call_timeout_);
  Response response;
  const grpc::Status status = (stub.*method)(&context, request, &response);
  if (!status.ok()) throw_for_status(status, what, kind);
  return response;
}

etcdserverpb::TxnResponse EtcdClient::txn(const etcdserverpb::TxnRequest& request, CallKind kind) {
  if (kind == CallKind::kWrite) {
    BatchedTxn done = writes_->run(request);
    if (!done.status.ok()) throw_for_status(done.status, "txn", kind);
    return std::move(done.response);
  }
  return call(&etcdserverpb::KV::Stub::Txn, *kv_, request, "txn", kind);
}

etcdserverpb::RangeResponse EtcdClient::range(const etcdserverpb::RangeRequest& request) {
  return call(&etcdserverpb::KV::Stub::Range, *kv_, request, "range", CallKind::kRead);
}

etcdserverpb::PutResponse EtcdClient::put(const etcdserverpb::PutRequest& request) {
  return call(&etcdserverpb::KV::Stub::Put, *kv_, request, "put", CallKind::kWrite);
}

etcdserverpb::DeleteRangeResponse EtcdClient::delete_range(
    const etcdserverpb::DeleteRangeRequest& request) {
  return call(&etcdserverpb::KV::Stub::DeleteRange, *kv_, request, "delete", CallKind::kWrite);
}

etcdserverpb::LeaseGrantResponse EtcdClient::lease_grant(std::int64_t ttl_seconds) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  auto response = call(&etcdserverpb::Lease::Stub::LeaseGrant, *lease_, request, "lease grant",
                       CallKind::kWrite);
  if (!response.error().empty()) throw InternalError("etcd lease grant: " + response.error());
  return response;
}

void EtcdClient::lease_revoke(std::int64_t lease_id) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease_id);
  call(&etcdserverpb::Lease::Stub::LeaseRevoke, *lease_, request, "lease revoke", CallKind::kWrite);
}

std::int64_t EtcdClient::lease_keep_alive(
    std::int64_t lease_id, std::optional<std::chrono::steady_clock::time_point> alive_until) {
  const auto now = std::chrono::steady_clock::now();
  if (alive_until && *alive_until > now + kSharedStreamMargin) {
    return keep_alive_stream(lease_id).renew(lease_id, now + call_timeout_);
  }
  // etcd's remaining TTL is in whole seconds, rounded toward zero: ttl >= 2 is at least 2 s
  // left, ttl <= -1 (-1 also for a lease that does not exist) at least 1 s past its expiry,
  // which no keep-alive can undo (etcd would answer 0 once it has revoked the lease).
  const std::int64_t left = lease_time_to_live(lease_id, false).ttl();
  if (left < 0) return 0;
  const auto after = std::chrono::steady_clock::now();
  if (std::chrono::seconds(left) > kSharedStreamMargin) {
    return keep_alive_stream(lease_id).renew(lease_id, after + call_timeout_);
  }
  return keep_alive_stream(lease_id).renew_alone(lease_id, after + call_timeout_);
}

etcdserverpb::LeaseTimeToLiveResponse EtcdClient::lease_time_to_live(std::int64_t lease_id,
                                                                     bool keys) {
  etcdserverpb::LeaseTimeToLiveRequest request;
  request.set_id(lease_id);
  request.set_keys(keys);
  return call(&etcdserverpb::Lease::Stub::LeaseTimeToLive, *lease_, request, "lease time-to-live",
              CallKind::kRead);
}

std::vector<mvccpb::KeyValue> read_keys(EtcdClient& client,
                                        const std::vector<std::string>& etcd_keys) {
  // etcd refuses transactions with more operations than its --max-txn-ops (128 by default).
  constexpr std::size_t kMaxOpsPerTxn = 64;
  std::vector<mvccpb::KeyValue> found;
  for (std::size_t first = 0; first < etcd_keys.size(); first += kMaxOpsPerTxn) {
    etcdserverpb::TxnRequest request;  // no compare: a consistent multi-key read
    const std::size_t last = std::min(etcd_keys.size(), first + kMaxOpsPerTxn);
    for (std::size_t i = first; i < last; ++i) *request.add_success() = get_op(etcd_keys[i]);
    const auto response = client.txn(request, CallKind::kRead);
    for (const auto& op : response.responses()) {
      for (const auto& kv : op.response_range().kvs()) found.push_back(kv);
    }
  }
  return found;
}

etcdserverpb::Compare compare_create_revision(const std::string& key, std::int64_t revision) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::CREATE);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_create_revision(revision);
  return compare;
}

etcdserverpb::Compare compare_mod_revision(const std::string& key, std::int64_t revision) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::MOD);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_mod_revision(revision);
  return compare;
}

etcdserverpb::Compare compare_lease(const std::string& key, std::int64_t lease_id) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::LEASE);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_lease(lease_id);
  return compare;
}

etcdserverpb::Compare compare_exists(const std::string& key) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::CREATE);
  compare.set_result(etcdserverpb::Compare::GREATER);
  compare.set_create_revision(0);
  return compare;
}

etcdserverpb::Compare compare_value(const std::string& key, const std::string& value) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::VALUE);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_value(value);
  return compare;
}

etcdserverpb::Compare compare_none_in(const std::string& begin, const std::string& end) {
  etcdserverpb::Compare compare = compare_create_revision(begin, 0);
  compare.set_range_end(end);
  return compare;
}

etcdserverpb::RequestOp put_op(const std::string& key, const std::string& value,
                               std::int64_t lease_id) {
  etcdserverpb::RequestOp op;
  auto* put = op.mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease_id);
  return op;
}

etcdserverpb::RequestOp get_op(const std::string& key) {
  etcdserverpb::RequestOp op;
  op.mutable_request_range()->set_key(key);
  return op;
}

etcdserverpb::RequestOp delete_op(const std::string& key) {
  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key(key);
  return op;
}

etcdserverpb::RequestOp delete_op_with_prev(const std::string& key) {
  etcdserverpb::RequestOp op = delete_op(key);
  op.mutable_request_delete_range()->set_prev_kv(true);
  return op;
}

etcdserverpb::RequestOp range_op(const std::string& begin, const std::string& end) {
  etcdserverpb::RequestOp op = get_op(begin);
  op.mutable_request_range()->set_range_end(end);
  return op;
}

etcdserverpb::RequestOp delete_range_op_with_prev(const std::string& begin,
                                                  const std::string& end) {
  etcdserverpb::RequestOp op = delete_op_with_prev(begin);
  op.mutable_request_delete_range()->set_range_end(end);
  return op;
}

etcdserverpb::RangeRequest range_request(const std::string& key) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  return request;
}

etcdserverpb::RangeRequest prefix_request(const std::string& prefix) {
  etcdserverpb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(prefix_range_end(prefix));
  return request;
}

}  // namespace dlock::store::etcd
