#include "cli/output.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <ostream>

#include "client/json_codec.h"

namespace dlock::cli {
namespace {

using client::detail::format_rfc3339;

std::string time_or_dash(WallClock::time_point time) {
  return time == WallClock::time_point{} ? "-" : format_rfc3339(time);
}

boost::json::object lock_json(const LockInfo& info) {
  return boost::json::object{{"key", info.key},
                             {"fencing_token", info.fencing_token},
                             {"owner", info.owner_id},
                             {"session_id", info.session_id},
                             {"acquired_at", time_or_dash(info.acquired_at)},
                             {"expires_at", time_or_dash(info.expires_at)}};
}

}  // namespace

void Printer::session(const SessionInfo& info) {
  if (json_) {
    out_ << boost::json::serialize(
                boost::json::object{{"session_id", info.session_id},
                                    {"owner", info.owner_id},
                                    {"ttl_ms", info.ttl.count()},
                                    {"expires_at", time_or_dash(info.expires_at)}})
         << '\n';
    return;
  }
  out_ << "session " << info.session_id << "  owner " << info.owner_id << "  ttl "
       << client::format_duration(info.ttl) << "  expires " << time_or_dash(info.expires_at)
       << '\n';
}

void Printer::keepalive(const SessionInfo& info) {
  if (json_) {
    out_ << boost::json::serialize(
                boost::json::object{{"session_id", info.session_id},
                                    {"ttl_ms", info.ttl.count()},
                                    {"expires_at", time_or_dash(info.expires_at)}})
         << '\n';
    return;
  }
  out_ << "session " << info.session_id << " kept alive until " << time_or_dash(info.expires_at)
       << '\n';
}

void Printer::session_closed(const std::string& session_id) {
  if (json_) {
    out_ << boost::json::serialize(
                boost::json::object{{"session_id", session_id}, {"closed", true}})
         << '\n';
    return;
  }
  out_ << "session " << session_id << " closed (its locks were released)\n";
}

void Printer::granted(const LockHandle& handle, const std::string& ns) {
  const auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(handle.client_deadline -
                                                                         SteadyClock::now());
  if (json_) {
    out_ << boost::json::serialize(
                boost::json::object{{"key", handle.key},
                                    {"ns", ns.empty() ? "default" : ns},
                                    {"fencing_token", handle.fencing_token},
                                    {"owner", handle.owner_id},
                                    {"session_id", handle.session_id},
                                    {"expires_at", time_or_dash(handle.server_expiry)}})
         << '\n';
    return;
  }
  out_ << "acquired " << handle.key << "  fencing token " << handle.fencing_token << "  expires "
       << time_or_dash(handle.server_expiry) << " (in about "
       << client::format_duration(std::chrono::duration_cast<std::chrono::seconds>(ttl)) << ")\n";
}

void Printer::extended(const std::string& key, const client::ExtendResult& result) {
  if (json_) {
    out_ << boost::json::serialize(
                boost::json::object{{"key", key},
                                    {"fencing_token", result.fencing_token},
                                    {"ttl_ms", result.ttl.count()},
                                    {"expires_at", time_or_dash(result.server_expiry)}})
         << '\n';
    return;
  }
  out_ << "extended " << key << "  fencing token " << result.fencing_token << "  expires "
       << time_or_dash(result.server_expiry) << '\n';
}

void Printer::released(const std::string& key, FencingToken token) {
  if (json_) {
    out_ << boost::json::serialize(
                boost::json::object{{"key", key}, {"fencing_token", token}, {"released", true}})
         << '\n';
    return;
  }
  out_ << "released " << key << " (fencing token " << token << ")\n";
}

void Printer::lock(const std::string& key, const std::optional<LockInfo>& info) {
  if (json_) {
    boost::json::object object = info ? lock_json(*info) : boost::json::object{{"key", key}};
    object["held"] = info.has_value();
    out_ << boost::json::serialize(object) << '\n';
    return;
  }
  if (!info) {
    out_ << key << " is free\n";
    return;
  }
  out_ << "key            " << info->key << '\n'
       << "fencing token  " << info->fencing_token << '\n'
       << "owner          " << info->owner_id << '\n'
       << "session        " << info->session_id << '\n'
       << "acquired at    " << time_or_dash(info->acquired_at) << '\n'
       << "expires at     " << time_or_dash(info->expires_at) << '\n';
}

void Printer::locks(const std::vector<LockInfo>& infos) {
  if (json_) {
    boost::json::array array;
    for (const LockInfo& info : infos) array.push_back(lock_json(info));
    out_ << boost::json::serialize(boost::json::object{{"locks", std::move(array)}}) << '\n';
    return;
  }
  if (infos.empty()) {
    out_ << "no locks held\n";
    return;
  }
  out_ << "KEY\tFENCING_TOKEN\tOWNER\tSESSION\tEXPIRES_AT\n";
  for (const LockInfo& info : infos) {
    out_ << info.key << '\t' << info.fencing_token << '\t' << info.owner_id << '\t'
         << info.session_id << '\t' << time_or_dash(info.expires_at) << '\n';
  }
}

void Printer::revoked(const std::string& key, const LockOutcome& outcome) {
  if (json_) {
    boost::json::object object{{"key", key}, {"revoked", outcome.revoked}};
    if (outcome.fencing_token) object["fencing_token"] = *outcome.fencing_token;
    if (outcome.owner_id) object["owner"] = *outcome.owner_id;
    out_ << boost::json::serialize(object) << '\n';
    return;
  }
  if (!outcome.revoked) {
    out_ << key << " was not held; nothing revoked\n";
    return;
  }
  out_ << "revoked " << key;
  if (outcome.fencing_token) out_ << " (fencing token " << *outcome.fencing_token << ")";
  if (outcome.owner_id) out_ << " from " << *outcome.owner_id;
  out_ << '\n';
}

void Printer::held(const std::string& key, std::chrono::milliseconds waited) {
  if (json_) {
    out_ << boost::json::serialize(boost::json::object{
                {"key", key}, {"acquired", false}, {"error", {{"code", "held"}}}})
         << '\n';
    return;
  }
  out_ << key << " is held by another owner; not acquired within "
       << client::format_duration(waited) << '\n';
}

}  // namespace dlock::cli
