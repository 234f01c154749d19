#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "client/session_state.h"
#include "dlock/client.h"

namespace dlock::client {
namespace detail {

bool LossFlag::mark(const std::string& reason,
                    const std::function<void(const std::string&)>& callback) {
  {
    std::lock_guard lock(mutex_);
    if (lost_.load()) return false;
    reason_ = reason;
    lost_.store(true);
  }
  if (callback) callback(reason);
  return true;
}

std::string LossFlag::reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

namespace {

// Keeps the session alive every ttl/3. A transient failure is retried until the session's own
// deadline: only then can the server have expired it, and only then is it reported lost.
void keepalive_loop(const std::stop_token& stop, SessionState& state) {
  ClientCore& core = *state.core;
  LeaseRenewal renewal;
  renewal.retry_delay = core.options.backoff_initial;
  renewal.deadline = [&state] {
    std::lock_guard lock(state.mutex);
    return state.deadline;
  };
  renewal.renew = [&](SteadyClock::time_point deadline) -> std::optional<SteadyClock::time_point> {
    try {
      auto [info, sent_at] = core.keepalive(state.id, CallContext{deadline, stop, {}, {}});
      // A keepalive renews for the session's TTL: never trust more than the one it opened with.
      const auto ttl = ClientCore::trusted_ttl(state.ttl, info.ttl);
      std::lock_guard lock(state.mutex);
      state.deadline = core.lease_deadline(sent_at, ttl);
      return sent_at + ttl / 3;
    } catch (const SessionNotFoundError& error) {
      state.gone = true;
      state.loss.mark("session expired on the server: " + std::string(error.what()), state.on_lost);
      return std::nullopt;
    }
  };
  renewal.on_expired = [&state](const std::string& error) {
    state.loss.mark("no successful keepalive within the session TTL: " + error, state.on_lost);
  };
  renewal.on_retry = [&](const std::string& error) {
    core.log("keepalive of session " + state.id + " failed, retrying: " + error);
  };
  renew_until_deadline(renewal, core.clock.now() + state.ttl / 3, core.clock, stop);
}

}  // namespace
}  // namespace detail

std::string default_owner() {
  std::string user;
  for (const char* name : {"DLOCK_OWNER", "USER", "LOGNAME"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      if (std::string_view(name) == "DLOCK_OWNER") return value;
      user = value;
      break;
    }
  }
  if (user.empty()) user = "dlock";
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return user;
  return user + "@" + host;
}

Session::Session(Client& client, SessionOptions options)
    : state_(std::make_shared<detail::SessionState>()) {
  detail::ClientCore& core = *client.core_;
  state_->core = &core;
  state_->owner = options.owner.empty() ? default_owner() : options.owner;
  state_->on_lost = std::move(options.on_lost);
  const SteadyClock::time_point sent_at = core.clock.now();
  const SessionInfo info =
      core.open_session(state_->owner, options.ttl, options.lock_delay, core.context({}));
  state_->id = info.session_id;
  state_->lock_delay = info.lock_delay;
  state_->owner = info.owner_id;
  state_->ttl = info.ttl.count() > 0 ? info.ttl : options.ttl;
  if (state_->ttl.count() <= 0) {
    throw InternalError("open session: server granted no ttl_ms");
  }
  state_->deadline = core.lease_deadline(sent_at, state_->ttl);
  state_->keepalive = std::jthread(
      [state = state_.get()](std::stop_token stop) { detail::keepalive_loop(stop, *state); });
}

Session::Session(Session&&) noexcept = default;

Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    try {
      close();
    } catch (const std::exception& error) {
      state_->core->log(std::string("closing the replaced session failed: ") + error.what());
    }
    state_ = std::move(other.state_);
  }
  return *this;
}

Session::~Session() {
  if (!state_) return;
  try {
    close();
  } catch (const std::exception& error) {
    state_->core->log(std::string("closing session failed: ") + error.what());
  }
}

const std::string& Session::id() const { return state_->id; }
const std::string& Session::owner() const { return state_->owner; }
std::chrono::milliseconds Session::ttl() const { return state_->ttl; }
std::chrono::milliseconds Session::lock_delay() const { return state_->lock_delay; }
bool Session::lost() const { return state_->loss.lost(); }
std::string Session::lost_reason() const { return state_->loss.reason(); }

void Session::close() {
  if (!state_ || state_->closed.exchange(true)) return;
  state_->keepalive.request_stop();
  if (state_->keepalive.joinable()) state_->keepalive.join();
  if (state_->gone) return;
  try {
    // Short budget: closing is a courtesy (the session expires by itself); do not hang exit.
    state_->core->close_session(
        state_->id,
        state_->core->context(SteadyClock::now() + state_->core->options.request_timeout));
  } catch (const SessionNotFoundError&) {
    // Already gone on the server: the goal of close is reached.
  }
}

}  // namespace dlock::client
