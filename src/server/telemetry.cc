#include "server/telemetry.h"

#include <prometheus/text_serializer.h>

#include <atomic>
#include <boost/json/serialize.hpp>
#include <cstdio>
#include <mutex>

#include "auth/crypto.h"
#include "core/store_key.h"
#include "server/authorization.h"
#include "server/json_util.h"

namespace dlock::server {
namespace {

std::atomic<int> g_log_threshold{1};  // 0 debug, 1 info, 2 warn, 3 error
std::mutex g_log_mutex;

int level_rank(std::string_view level) {
  if (level == "debug") return 0;
  if (level == "warn") return 2;
  if (level == "error") return 3;
  return 1;
}

}  // namespace

void set_log_level(std::string_view level) { g_log_threshold = level_rank(level); }

void log_event(std::string_view level, std::string_view event, boost::json::object fields) {
  if (level_rank(level) < g_log_threshold.load(std::memory_order_relaxed)) return;
  boost::json::object line;
  line["ts"] = format_time(WallClock::now());
  line["level"] = level;
  line["event"] = event;
  for (auto& field : fields) line[field.key()] = std::move(field.value());
  const std::string text = boost::json::serialize(line);
  std::lock_guard lock(g_log_mutex);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::string session_fingerprint(std::string_view session_id) {
  return auth::to_hex(auth::sha256(session_id)).substr(0, 12);
}

Telemetry::Telemetry(std::string backend)
    : backend_(std::move(backend)), registry_(std::make_shared<prometheus::Registry>()) {
  using prometheus::Histogram;
  auto& acquire = prometheus::BuildHistogram()
                      .Name("dlock_lock_acquire_seconds")
                      .Help("Latency of lock acquire requests, by backend and outcome")
                      .Register(*registry_);
  const Histogram::BucketBoundaries buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                               0.25,   0.5,   1,      2.5,   5,    10,    30,   60};
  acquire_granted_ = &acquire.Add({{"backend", backend_}, {"outcome", "granted"}}, buckets);
  acquire_held_ = &acquire.Add({{"backend", backend_}, {"outcome", "held"}}, buckets);
  acquire_error_ = &acquire.Add({{"backend", backend_}, {"outcome", "error"}}, buckets);
  http_requests_ = &prometheus::BuildCounter()
                        .Name("dlock_http_requests_total")
                        .Help("HTTP requests answered, by status code")
                        .Register(*registry_);
  backend_errors_ = &prometheus::BuildCounter()
                         .Name("dlock_backend_errors_total")
                         .Help("Backend calls that failed transiently, by error code")
                         .Register(*registry_);
  auth_denied_ = &prometheus::BuildCounter()
                      .Name("dlock_auth_denied_total")
                      .Help("Requests refused by authentication or authorization, by reason")
                      .Register(*registry_);
  auth_reloads_ = &prometheus::BuildCounter()
                       .Name("dlock_auth_reloads_total")
                       .Help("Reloads of the tokens file (SIGHUP), by result")
                       .Register(*registry_);
  const prometheus::Labels labels = {{"backend", backend_}};
  grants_ = &prometheus::BuildCounter()
                 .Name("dlock_lock_grants_total")
                 .Help("Locks granted (including hand-overs to waiters)")
                 .Register(*registry_)
                 .Add(labels);
  releases_ = &prometheus::BuildCounter()
                   .Name("dlock_lock_releases_total")
                   .Help("Locks released by their holder or with their session")
                   .Register(*registry_)
                   .Add(labels);
  expiries_ = &prometheus::BuildCounter()
                   .Name("dlock_lock_expiries_total")
                   .Help("Expired locks removed by the reaper")
                   .Register(*registry_)
                   .Add(labels);
  sessions_lost_ = &prometheus::BuildCounter()
                        .Name("dlock_sessions_lost_total")
                        .Help("Sessions that expired without being closed")
                        .Register(*registry_)
                        .Add(labels);
  backend_attempts_ = &prometheus::BuildCounter()
                           .Name("dlock_backend_acquire_attempts_total")
                           .Help("Backend writes that may grant a lock (acquire or hand-over)")
                           .Register(*registry_)
                           .Add(labels);
  waiters_ = &prometheus::BuildGauge()
                  .Name("dlock_waiters")
                  .Help("Acquire requests currently waiting on this server")
                  .Register(*registry_)
                  .Add(labels);
  sessions_ = &prometheus::BuildGauge()
                   .Name("dlock_sessions")
                   .Help("Sessions opened through this server and not yet closed or expired")
                   .Register(*registry_)
                   .Add(labels);
}

std::string Telemetry::scrape() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void Telemetry::on_http_request(int status) {
  http_requests_->Add({{"code", std::to_string(status)}}).Increment();
}

void Telemetry::on_auth_denied(std::string_view reason) {
  auth_denied_->Add({{"reason", std::string(reason)}}).Increment();
}

void Telemetry::on_tokens_reload(bool ok) {
  auth_reloads_->Add({{"result", ok ? "ok" : "error"}}).Increment();
}

void Telemetry::on_sessions(std::int64_t delta) {
  sessions_->Increment(static_cast<double>(delta));
}

void Telemetry::on_acquire(std::string_view outcome, std::chrono::nanoseconds latency) {
  const double seconds = std::chrono::duration<double>(latency).count();
  if (outcome == "granted") {
    acquire_granted_->Observe(seconds);
  } else if (outcome == "held") {
    acquire_held_->Observe(seconds);
  } else {
    acquire_error_->Observe(seconds);
  }
}

void Telemetry::on_grant(const LockHandle& handle) {
  grants_->Increment();
  log_event("info", "grant",
            {{"key", handle.key},
             {"fencing_token", handle.fencing_token},
             {"owner", handle.owner_id},
             {"session", session_fingerprint(handle.session_id)},
             {"expires_at", format_time(handle.server_expiry)}});
}

void Telemetry::on_release(std::string_view key, FencingToken token) {
  releases_->Increment();
  log_event("info", "release", {{"key", key}, {"fencing_token", token}});
}

void Telemetry::on_expiry(const LockInfo& info) {
  expiries_->Increment();
  log_event("info", "expiry",
            {{"key", info.key},
             {"fencing_token", info.fencing_token},
             {"owner", info.owner_id},
             {"session", session_fingerprint(info.session_id)},
             {"expired_at", format_time(info.expires_at)}});
  const auto parts = store_key::split(info.key);
  audit("expire", principal_of_owner(info.owner_id), parts ? parts->ns : "",
        parts ? parts->key : std::string_view(info.key), info.fencing_token, "");
}

void Telemetry::on_session_lost(std::string_view session_id) {
  sessions_lost_->Increment();
  log_event("warn", "session_lost", {{"session", session_fingerprint(session_id)}});
}

void Telemetry::on_backend_error(const Error& error) {
  backend_errors_->Add({{"backend", backend_}, {"code", to_string(error.code())}}).Increment();
  log_event("warn", "backend_error",
            {{"code", to_string(error.code())}, {"message", error.what()}});
}

void Telemetry::on_backend_attempt() { backend_attempts_->Increment(); }

void Telemetry::on_waiters(std::int64_t delta) { waiters_->Increment(static_cast<double>(delta)); }

}  // namespace dlock::server
