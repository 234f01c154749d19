#pragma once

// Helpers the API's handler files (api.cc, api_elections.cc) share; not part of the server's
// interface.

#include <string>
#include <utility>

#include "core/lock_service.h"
#include "dlock/errors.h"
#include "server/api.h"
#include "server/error_mapping.h"
#include "server/input_checks.h"
#include "server/json_util.h"

namespace dlock::server::api_internal {

// Answers `reply` from a service callback: the value through `render`, an error through the
// one error mapping.
template <typename T, typename Render>
inline core::LockService::Callback<T> answer(Reply reply, Render render) {
  return [reply = std::move(reply), render = std::move(render)](core::Outcome<T> outcome) {
    if (outcome.error) return reply(error_response(outcome.error));
    try {
      reply(render(std::move(*outcome.value)));
    } catch (...) {
      reply(error_response(std::current_exception()));
    }
  };
}

template <typename T>
inline T required(std::optional<T> value, const char* field) {
  if (!value) throw InvalidArgumentError(field, std::string(field) + " is required");
  return std::move(*value);
}

// The namespace of a lock write: the body's `ns`, else the query's, else "default". A malformed
// query `ns` is 400 even when the body's wins (as on every other route).
inline std::string body_namespace(const BodyReader& reader, const RequestContext& context) {
  const auto query = context.query("ns");
  if (query) checked_namespace(*query);
  return checked_namespace(reader.string("ns").value_or(query.value_or("default")));
}

// Who an audit event names: the principal ("" without authentication) and the peer.
struct AuditWho {
  std::string principal;
  std::string remote;
};

inline AuditWho audit_who(const RequestContext& context) {
  return {context.principal ? context.principal->name : "", context.remote_address};
}

}  // namespace dlock::server::api_internal

namespace dlock::server {

// Api::count_waiter (api.h): here, where both api.cc and api_elections.cc see it.
template <class Done>
Done Api::count_waiter(const Waiter& waiter, Done done) {
  if (auto refusal = waiting_share_.try_add(waiter.key); !refusal.empty()) {
    throw ResourceExhaustedError(refusal);
  }
  const bool per_principal = auth_.enabled();
  if (per_principal) {
    if (auto refusal = waiters_per_principal_.try_add(waiter.principal); !refusal.empty()) {
      waiting_share_.remove(waiter.key);
      throw ResourceExhaustedError(refusal);
    }
  }
  return [this, done = std::move(done), waiter, per_principal](auto outcome) {
    if (per_principal) waiters_per_principal_.remove(waiter.principal);
    waiting_share_.remove(waiter.key);
    done(std::move(outcome));
  };
}

}  // namespace dlock::server
