#include <algorithm>
#include <optional>

#include "client/session_state.h"
#include "dlock/client.h"

namespace dlock::client {
namespace detail {
namespace {

void record_extension(LockState& state, const ExtendResult& result) {
  std::lock_guard lock(state.mutex);
  state.server_expiry = result.server_expiry;
  if (state.session_bound) return;  // its deadline is the session's, which keepalives move
  state.ttl = result.ttl;
  state.client_deadline = result.client_deadline;
}

// Extends every ttl/3. Like the session keepalive, a transient failure only becomes "lost"
// once the client deadline has passed without a successful extend.
void extend_loop(const std::stop_token& stop, LockState& state) {
  ClientCore& core = *state.core;
  SteadyClock::time_point first;
  {
    std::lock_guard lock(state.mutex);
    first = state.client_deadline - state.ttl + state.ttl / 3;
  }
  LeaseRenewal renewal;
  renewal.retry_delay = core.options.backoff_initial;
  renewal.deadline = [&state] {
    std::lock_guard lock(state.mutex);
    return state.client_deadline;
  };
  renewal.renew = [&](SteadyClock::time_point deadline) -> std::optional<SteadyClock::time_point> {
    std::chrono::milliseconds ttl;
    {
      std::lock_guard lock(state.mutex);
      ttl = state.ttl;
    }
    try {
      const ExtendResult result =
          core.extend(state.key, state.session->id, state.token, ttl, state.ns,
                      CallContext{deadline, stop, {}, {}}, state.mode);
      record_extension(state, result);
      return result.client_deadline - result.ttl + result.ttl / 3;
    } catch (const LockLostError& error) {
      state.gone = true;
      state.loss.mark(std::string("lock lost: ") + error.what(), state.on_lost);
    } catch (const SessionNotFoundError& error) {
      state.gone = true;
      state.session->gone = true;
      state.loss.mark(std::string("session lost: ") + error.what(), state.on_lost);
    }
    return std::nullopt;
  };
  renewal.on_expired = [&state](const std::string& error) {
    state.loss.mark("no successful extend before the lock's deadline: " + error, state.on_lost);
  };
  renewal.on_retry = [&](const std::string& error) {
    core.log("extending " + state.key + " failed, retrying: " + error);
  };
  renew_until_deadline(renewal, first, core.clock, stop);
}

// AcquireOptions::mode and ::permits (dlock/client.h) as the request they spell.
HoldSpec hold_spec(const std::string& key, const AcquireOptions& options) {
  if (options.permits == 0) {
    if (options.mode == HoldMode::kPermit) {
      throw InvalidArgumentError("limit", "acquire " + key +
                                              ": a permit needs AcquireOptions::permits, the "
                                              "semaphore's number of permits");
    }
    return {options.mode, 0, {}};
  }
  if (options.mode == HoldMode::kShared) {
    throw InvalidArgumentError("mode", "acquire " + key +
                                           ": a shared hold and a semaphore permit exclude each "
                                           "other (mode shared with permits > 0)");
  }
  return {HoldMode::kPermit, options.permits, {}};
}

}  // namespace
}  // namespace detail

std::optional<Lock> Session::acquire(const std::string& key, AcquireOptions options) {
  detail::ClientCore& core = *state_->core;
  if (options.session_bound && options.ttl.count() != 0) {
    throw InvalidArgumentError("ttl_ms", "a session-bound lock has no TTL of its own");
  }
  const LockLease lease = options.session_bound ? LockLease::session() : LockLease(options.ttl);
  const detail::HoldSpec hold = detail::hold_spec(key, options);
  auto grant = core.acquire(key, state_->id, lease, options.wait, options.ns,
                            core.context(core.deadline_from({}, options.wait)), hold);
  if (!grant) return std::nullopt;
  const LockHandle* handle = &grant->handle;
  auto state = std::make_unique<detail::LockState>();
  state->core = &core;
  state->session = state_;
  state->key = key;
  state->ns = options.ns;
  state->token = handle->fencing_token;
  state->on_lost = std::move(options.on_lost);
  state->client_deadline = handle->client_deadline;
  state->server_expiry = handle->server_expiry;
  state->ttl = grant->ttl;
  state->session_bound = handle->session_bound;
  state->mode = handle->mode;
  state->limit = grant->limit;
  // A session-bound lock is trusted exactly as long as its session (Lock::client_deadline).
  if (state->session_bound) state->client_deadline = SteadyClock::time_point::max();
  if (options.auto_extend && !state->session_bound) {
    state->extender = std::jthread(
        [raw = state.get()](std::stop_token stop) { detail::extend_loop(stop, *raw); });
  }
  return Lock(std::move(state));
}

Lock::Lock(std::unique_ptr<detail::LockState> state) : state_(std::move(state)) {}
Lock::Lock(Lock&&) noexcept = default;

Lock& Lock::operator=(Lock&& other) noexcept {
  if (this != &other) {
    Lock dying(std::move(*this));  // releases the old grant, logging failures
    state_ = std::move(other.state_);
  }
  return *this;
}

Lock::~Lock() {
  if (!state_ || state_->released || state_->gone || state_->session->gone) return;
  try {
    release();
  } catch (const std::exception& error) {
    state_->core->log("releasing " + state_->key + " (token " + std::to_string(state_->token) +
                      ") failed: " + error.what());
  }
}

const std::string& Lock::key() const { return state_->key; }
const std::string& Lock::ns() const { return state_->ns; }
const std::string& Lock::session_id() const { return state_->session->id; }
FencingToken Lock::token() const { return state_->token; }

bool Lock::still_valid() const {
  if (state_->released || state_->loss.lost() || state_->session->loss.lost()) return false;
  return SteadyClock::now() < client_deadline();
}

// A lock dies with its session (C2): it is trusted no longer than the session is.
SteadyClock::time_point Lock::client_deadline() const {
  SteadyClock::time_point lock_deadline;
  {
    std::lock_guard lock(state_->mutex);
    lock_deadline = state_->client_deadline;
  }
  std::lock_guard session_lock(state_->session->mutex);
  return std::min(lock_deadline, state_->session->deadline);
}

WallClock::time_point Lock::server_expiry() const {
  std::lock_guard lock(state_->mutex);
  return state_->server_expiry;
}

std::string Lock::lost_reason() const {
  if (state_->loss.lost()) return state_->loss.reason();
  if (state_->session->loss.lost()) return state_->session->loss.reason();
  return {};
}

bool Lock::session_bound() const { return state_->session_bound; }
HoldMode Lock::mode() const { return state_->mode; }
std::uint32_t Lock::limit() const { return state_->limit; }

void Lock::extend(std::chrono::milliseconds ttl) {
  detail::ClientCore& core = *state_->core;
  std::chrono::milliseconds effective = ttl;
  {
    std::lock_guard lock(state_->mutex);
    if (effective.count() <= 0) effective = state_->ttl;
  }
  try {
    const ExtendResult result = core.extend(state_->key, state_->session->id, state_->token,
                                            effective, state_->ns, core.context({}), state_->mode);
    detail::record_extension(*state_, result);
  } catch (const LockLostError& error) {
    state_->gone = true;
    state_->loss.mark(std::string("lock lost: ") + error.what(), state_->on_lost);
    throw;
  }
}

void Lock::release() {
  if (state_->released.exchange(true)) return;
  state_->extender.request_stop();
  if (state_->extender.joinable()) state_->extender.join();
  if (state_->gone || state_->session->gone) {
    throw LockLostError("release " + state_->key + ": " + lost_reason());
  }
  // The session's close already released every lock of the session.
  if (state_->session->closed) return;
  detail::ClientCore& core = *state_->core;
  const detail::CallContext context =
      core.context(SteadyClock::now() + core.options.request_timeout);
  if (state_->leader) {
    // A leadership resigns through its election's route (the lock route would do the same).
    core.resign(state_->key, state_->session->id, state_->token, state_->ns, context);
    return;
  }
  core.release(state_->key, state_->session->id, state_->token, state_->ns, context, state_->mode);
}

}  // namespace dlock::client
