// Elections through the client (C3 "Elections", docs/adr/0020-more-primitives-design.md): the
// proclaim, resign and read/observe routes, Session::campaign and the Leadership handle. A
// leadership is a session-bound Lock (ADR-0018) whose state also carries the value: it is
// lost, checked and released by the Lock machinery (lock.cc), released by resigning.

#include <boost/json/serialize.hpp>

#include "client/client_core.h"
#include "client/error_mapping.h"
#include "client/json_codec.h"
#include "client/session_state.h"
#include "client/url.h"

namespace dlock::client {
namespace detail {
namespace {

HttpRequest post_json(std::string target, const boost::json::object& body) {
  return HttpRequest{Method::kPost, std::move(target), boost::json::serialize(body), {}};
}

}  // namespace

WallClock::time_point ClientCore::proclaim(const std::string& name, const std::string& session_id,
                                           FencingToken token, const std::string& value,
                                           const std::string& ns, const CallContext& context) {
  const std::string what = "proclaim " + name;
  const boost::json::object body{
      {"session_id", session_id}, {"fencing_token", token}, {"value", value}};
  const Exchange exchange =
      call(post_json(election_target(name, "/proclaim", ns), body), context, what);
  if (exchange.response.status != 200) {
    throw_api_error(parse_api_error(exchange.response), what);
  }
  const boost::json::object object = parse_object(exchange.response.body, what);
  const FencingToken answered = uint_member(object, "fencing_token");
  if (answered != token) {
    // A proclaim keeps the token; another one means another leadership (INV-04).
    throw LockLostError(what + ": server answered with token " + std::to_string(answered) +
                        ", ours is " + std::to_string(token));
  }
  return time_member(object, "expires_at");
}

void ClientCore::resign(const std::string& name, const std::string& session_id, FencingToken token,
                        const std::string& ns, const CallContext& context) {
  const std::string what = "resign " + name;
  const boost::json::object body{{"session_id", session_id}, {"fencing_token", token}};
  const Exchange exchange =
      call(post_json(election_target(name, "/resign", ns), body), context, what);
  if (exchange.response.status != 204) {
    throw_api_error(parse_api_error(exchange.response), what);
  }
}

std::optional<LeaderInfo> ClientCore::leader(const std::string& name, const std::string& ns,
                                             std::optional<FencingToken> after_token,
                                             const std::optional<std::string>& after_value,
                                             std::chrono::milliseconds wait,
                                             const CallContext& context) {
  const std::string what = (wait.count() > 0 ? "observe " : "leader ") + name;
  std::vector<std::pair<std::string, std::string>> query;
  if (after_token) query.emplace_back("after_token", std::to_string(*after_token));
  if (after_value) query.emplace_back("after_value", *after_value);
  if (wait.count() > 0) query.emplace_back("wait_ms", std::to_string(wait.count()));
  CallContext poll = context;
  // The server may hold the poll for `wait` before it answers (ADR-0012, as a waiting acquire).
  poll.attempt_slack = std::max(poll.attempt_slack, wait);
  const Exchange exchange =
      call(HttpRequest{Method::kGet, election_target(name, "", ns, std::move(query)), {}, {}}, poll,
           what);
  if (exchange.response.status == 404) {
    const ApiError error = parse_api_error(exchange.response);
    if (error.code == "no_leader") return std::nullopt;
    throw_api_error(error, what);
  }
  if (exchange.response.status != 200) {
    throw_api_error(parse_api_error(exchange.response), what);
  }
  return decode_leader_info(parse_object(exchange.response.body, what), name);
}

}  // namespace detail

std::optional<Leadership> Session::campaign(const std::string& name, const std::string& value,
                                            CampaignOptions options) {
  detail::ClientCore& core = *state_->core;
  detail::HoldSpec hold;
  hold.leader_value = value;
  auto grant = core.acquire(name, state_->id, LockLease::session(), options.wait, options.ns,
                            core.context(core.deadline_from({}, options.wait)), hold);
  if (!grant) return std::nullopt;
  auto state = std::make_unique<detail::LockState>();
  state->core = &core;
  state->session = state_;
  state->key = name;
  state->ns = options.ns;
  state->token = grant->handle.fencing_token;
  state->server_expiry = grant->handle.server_expiry;
  state->ttl = grant->ttl;
  // Session-bound whatever the answer says (C3): trusted exactly as long as its session.
  state->session_bound = true;
  state->client_deadline = SteadyClock::time_point::max();
  state->leader = true;
  state->value = grant->value;
  return Leadership(Lock(std::move(state)));
}

Leadership::Leadership(Lock lock) : lock_(std::move(lock)) {}
Leadership::Leadership(Leadership&&) noexcept = default;
Leadership& Leadership::operator=(Leadership&&) noexcept = default;
// The Lock resigns (LockState::leader) unless resigned or lost already.
Leadership::~Leadership() = default;

const std::string& Leadership::name() const { return lock_.key(); }
const std::string& Leadership::ns() const { return lock_.ns(); }
const std::string& Leadership::session_id() const { return lock_.session_id(); }
FencingToken Leadership::token() const { return lock_.token(); }

std::string Leadership::value() const {
  std::lock_guard guard(lock_.state_->mutex);
  return lock_.state_->value;
}

bool Leadership::still_valid() const { return lock_.still_valid(); }
SteadyClock::time_point Leadership::client_deadline() const { return lock_.client_deadline(); }
std::string Leadership::lost_reason() const { return lock_.lost_reason(); }

void Leadership::proclaim(const std::string& value) {
  detail::LockState& state = *lock_.state_;
  if (state.released) throw LockLostError("proclaim " + state.key + ": resigned");
  detail::ClientCore& core = *state.core;
  try {
    const WallClock::time_point expiry =
        core.proclaim(state.key, state.session->id, state.token, value, state.ns, core.context({}));
    std::lock_guard guard(state.mutex);
    state.value = value;
    state.server_expiry = expiry;
  } catch (const LockLostError& error) {
    state.gone = true;
    state.loss.mark(std::string("leadership lost: ") + error.what(), state.on_lost);
    throw;
  } catch (const SessionNotFoundError& error) {
    state.gone = true;
    state.session->gone = true;
    state.loss.mark(std::string("session lost: ") + error.what(), state.on_lost);
    throw LockLostError("proclaim " + state.key + ": " + error.what());
  }
}

void Leadership::resign() { lock_.release(); }
Lock& Leadership::lock() { return lock_; }
const Lock& Leadership::lock() const { return lock_; }

std::optional<LeaderInfo> Client::leader(const std::string& name, const std::string& ns,
                                         Deadline deadline) {
  return core_->leader(name, ns, std::nullopt, std::nullopt, std::chrono::milliseconds(0),
                       core_->context(deadline));
}

std::optional<LeaderInfo> Client::observe(const std::string& name, FencingToken after_token,
                                          const std::optional<std::string>& after_value,
                                          std::chrono::milliseconds wait, const std::string& ns,
                                          Deadline deadline) {
  return core_->leader(name, ns, after_token, after_value, wait,
                       core_->context(core_->deadline_from(deadline, wait)));
}

}  // namespace dlock::client
