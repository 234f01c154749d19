#include "dlock/client.h"
#include "client/client_core.h"

namespace dlock::client {

Client::Client(ClientOptions options)
    : core_(std::make_unique<detail::ClientCore>(std::move(options), nullptr)) {}

Client::Client(ClientOptions options, std::unique_ptr<detail::Transport> transport)
    : core_(std::make_unique<detail::ClientCore>(std::move(options), std::move(transport))) {}

Client::~Client() = default;

const std::string& Client::server_url() const { return core_->options.server_url; }

const std::vector<std::string>& Client::servers() const { return core_->options.servers; }

SessionInfo Client::open_session(const std::string& owner, std::chrono::milliseconds ttl,
                                 Deadline deadline, std::chrono::milliseconds lock_delay) {
  return core_->open_session(owner.empty() ? default_owner() : owner, ttl, lock_delay,
                             core_->context(deadline));
}

SessionInfo Client::keepalive(const std::string& session_id, Deadline deadline) {
  return core_->keepalive(session_id, core_->context(deadline)).first;
}

void Client::close_session(const std::string& session_id, Deadline deadline) {
  core_->close_session(session_id, core_->context(deadline));
}

std::optional<LockHandle> Client::acquire(const std::string& key, const std::string& session_id,
                                          LockLease lease, std::chrono::milliseconds wait,
                                          const std::string& ns, Deadline deadline, HoldMode mode) {
  if (mode == HoldMode::kPermit) {
    throw InvalidArgumentError("mode", "acquire " + key + ": a permit is acquire_permit's");
  }
  auto grant = core_->acquire(key, session_id, lease, wait, ns,
                              core_->context(core_->deadline_from(deadline, wait)), {mode, 0, {}});
  if (!grant) return std::nullopt;
  return std::move(grant->handle);
}

std::optional<LockHandle> Client::acquire_permit(const std::string& name,
                                                 const std::string& session_id, std::uint32_t limit,
                                                 LockLease lease, std::chrono::milliseconds wait,
                                                 const std::string& ns, Deadline deadline) {
  auto grant = core_->acquire(name, session_id, lease, wait, ns,
                              core_->context(core_->deadline_from(deadline, wait)),
                              {HoldMode::kPermit, limit, {}});
  if (!grant) return std::nullopt;
  return std::move(grant->handle);
}

ExtendResult Client::extend(const std::string& key, const std::string& session_id,
                            FencingToken token, std::chrono::milliseconds ttl,
                            const std::string& ns, Deadline deadline, HoldMode mode) {
  return core_->extend(key, session_id, token, ttl, ns, core_->context(deadline), mode);
}

void Client::release(const std::string& key, const std::string& session_id, FencingToken token,
                     const std::string& ns, Deadline deadline, HoldMode mode) {
  core_->release(key, session_id, token, ns, core_->context(deadline), mode);
}

std::optional<LockInfo> Client::get(const std::string& key, const std::string& ns,
                                    Deadline deadline) {
  return core_->get(key, ns, core_->context(deadline));
}

std::vector<LockInfo> Client::holders(const std::string& key, const std::string& ns,
                                      Deadline deadline) {
  return core_->holders(key, ns, core_->context(deadline));
}

SemaphoreInfo Client::semaphore(const std::string& name, const std::string& ns, Deadline deadline) {
  return core_->semaphore(name, ns, core_->context(deadline));
}

std::vector<LockInfo> Client::list(const std::string& prefix, std::size_t limit,
                                   const std::string& ns, Deadline deadline) {
  return core_->list(prefix, limit, ns, core_->context(deadline));
}

SessionPage Client::list_sessions(const std::string& owner, const std::string& principal,
                                  std::size_t limit, const std::string& after, Deadline deadline) {
  return core_->list_sessions(owner, principal, limit, after, core_->context(deadline));
}

SessionDetail Client::session_detail(const std::string& session_id, Deadline deadline) {
  return core_->session_detail(session_id, core_->context(deadline));
}

KeyState Client::state(const std::string& key, const std::string& ns, Deadline deadline) {
  return core_->state(key, ns, core_->context(deadline));
}

LockPage Client::list_page(const std::string& prefix, std::size_t limit, const std::string& after,
                           const std::string& ns, Deadline deadline) {
  return core_->list_page(prefix, limit, after, ns, core_->context(deadline));
}

LockPage Client::list_every_namespace(std::size_t limit, const std::string& after,
                                      Deadline deadline) {
  return core_->list_page({}, limit, after, {}, core_->context(deadline),
                          /*every_namespace=*/true);
}

LockOutcome Client::revoke(const std::string& key, const std::string& ns, Deadline deadline) {
  return core_->revoke(key, ns, core_->context(deadline));
}

}  // namespace dlock::client
