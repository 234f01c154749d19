#include "cli/output.h"

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <ostream>

#include "cli/terminal_text.h"
#include "cli/wait_line.h"
#include "client/json_codec.h"

namespace dlock::cli {
namespace {

using client::detail::format_rfc3339;

std::string time_or_dash(WallClock::time_point time) {
  return time == WallClock::time_point{} ? "-" : format_rfc3339(time);
}

boost::json::object lock_json(const LockInfo& info) {
  boost::json::object object{{"key", info.key},
                             {"fencing_token", info.fencing_token},
                             {"owner", info.owner_id},
                             {"session_id", info.session_id},
                             {"acquired_at", time_or_dash(info.acquired_at)},
                             {"expires_at", time_or_dash(info.expires_at)},
                             {"mode", to_string(info.mode)}};
  if (info.limit != 0) object["limit"] = info.limit;
  return object;
}

boost::json::array locks_json(const std::vector<LockInfo>& infos) {
  boost::json::array array;
  for (const LockInfo& info : infos) array.push_back(lock_json(info));
  return array;
}

// Rows in aligned columns, two spaces apart (the first row is the header).
void print_aligned(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  // Widths in bytes: printable() leaves only printable ASCII and valid UTF-8, whose
  // characters are counted by their lead bytes.
  const auto width = [](const std::string& text) {
    return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
  };
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t column = 0; column < row.size(); ++column) {
      widths[column] = std::max(widths[column], width(row[column]));
    }
  }
  for (const auto& row : rows) {
    for (std::size_t column = 0; column < row.size(); ++column) {
      out << row[column];
      if (column + 1 < row.size()) out << std::string(widths[column] - width(row[column]) + 2, ' ');
    }
    out << '\n';
  }
}

// One line per holder, under a header, aligned: how get and semaphore show several holders.
void holder_table(std::ostream& out, const std::vector<LockInfo>& holders) {
  std::vector<std::vector<std::string>> rows = {
      {"FENCING_TOKEN", "MODE", "OWNER", "SESSION", "EXPIRES_AT"}};
  for (const LockInfo& info : holders) {
    rows.push_back({std::to_string(info.fencing_token), to_string(info.mode),
                    printable(info.owner_id),
                    info.session_id.empty() ? "-" : printable(info.session_id),
                    time_or_dash(info.expires_at)});
  }
  print_aligned(out, rows);
}

}  // namespace

std::string format_age(std::chrono::milliseconds age) {
  const long long seconds = std::max<long long>(0, age.count() / 1000);
  const auto two = [](long long value) { return (value < 10 ? "0" : "") + std::to_string(value); };
  if (seconds < 60) return std::to_string(seconds) + "s";
  if (seconds < 3600) return std::to_string(seconds / 60) + "m" + two(seconds % 60) + "s";
  if (seconds < 86400) return std::to_string(seconds / 3600) + "h" + two(seconds / 60 % 60) + "m";
  return std::to_string(seconds / 86400) + "d" + two(seconds / 3600 % 24) + "h";
}

void Printer::session(const SessionInfo& info) {
  if (json_) {
    out_ << boost::json::serialize(
                boost::json::object{{"session_id", info.session_id},
                                    {"owner", info.owner_id},
                                    {"ttl_ms", info.ttl.count()},
                                    {"lock_delay_ms", info.lock_delay.count()},
                                    {"expires_at", time_or_dash(info.expires_at)}})
         << '\n';
    return;
  }
  out_ << "session " << printable(info.session_id) << "  owner " << printable(info.owner_id)
       << "  ttl " << client::format_duration(info.ttl);
  // Only when set: the line a session without lock-delay prints is unchanged.
  if (info.lock_delay.count() > 0) {
    out_ << "  lock-delay " << client::format_duration(info.lock_delay);
  }
  out_ << "  expires " << time_or_dash(info.expires_at) << '\n';
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
  out_ << "session " << printable(info.session_id) << " kept alive until "
       << time_or_dash(info.expires_at) << '\n';
}

void Printer::session_closed(const std::string& session_id) {
  if (json_) {
    out_ << boost::json::serialize(
                boost::json::object{{"session_id", session_id}, {"closed", true}})
         << '\n';
    return;
  }
  out_ << "session " << printable(session_id) << " closed (its locks were released)\n";
}

void Printer::granted(const LockHandle& handle, const std::string& ns, std::uint32_t limit) {
  const auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(handle.client_deadline -
                                                                         SteadyClock::now());
  if (json_) {
    boost::json::object object{{"key", handle.key},
                               {"ns", ns.empty() ? "default" : ns},
                               {"fencing_token", handle.fencing_token},
                               {"owner", handle.owner_id},
                               {"session_id", handle.session_id},
                               {"expires_at", time_or_dash(handle.server_expiry)},
                               {"mode", to_string(handle.mode)}};
    if (limit != 0) object["limit"] = limit;
    out_ << boost::json::serialize(object) << '\n';
    return;
  }
  out_ << "acquired " << printable(handle.key);
  if (handle.mode == HoldMode::kShared) out_ << " (shared)";
  if (handle.mode == HoldMode::kPermit) out_ << " (a permit of " << limit << ")";
  out_ << "  fencing token " << handle.fencing_token << "  expires "
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
  out_ << "extended " << printable(key) << "  fencing token " << result.fencing_token
       << "  expires " << time_or_dash(result.server_expiry) << '\n';
}

void Printer::released(const std::string& key, FencingToken token) {
  if (json_) {
    out_ << boost::json::serialize(
                boost::json::object{{"key", key}, {"fencing_token", token}, {"released", true}})
         << '\n';
    return;
  }
  out_ << "released " << printable(key) << " (fencing token " << token << ")\n";
}

void Printer::lock(const std::string& key, const std::vector<LockInfo>& holders,
                   const std::vector<client::Waiter>& waiters) {
  const auto top = std::max_element(
      holders.begin(), holders.end(),
      [](const LockInfo& a, const LockInfo& b) { return a.fencing_token < b.fencing_token; });
  if (json_) {
    boost::json::object object =
        top != holders.end() ? lock_json(*top) : boost::json::object{{"key", key}};
    object["held"] = top != holders.end();
    if (top != holders.end()) object["holders"] = locks_json(holders);
    boost::json::array waiting;
    for (const auto& waiter : waiters) {
      boost::json::object entry{{"position", waiter.position},
                                {"owner", waiter.owner_id},
                                {"mode", to_string(waiter.mode)},
                                {"waiting_ms", waiter.waiting.count()}};
      if (waiter.limit != 0) entry["limit"] = waiter.limit;
      if (!waiter.session_id.empty()) entry["session_id"] = waiter.session_id;
      waiting.push_back(std::move(entry));
    }
    object["waiters"] = std::move(waiting);
    out_ << boost::json::serialize(object) << '\n';
    return;
  }
  if (top == holders.end()) {
    out_ << printable(key) << " is free\n";
    return;
  }
  const LockInfo& info = *top;
  out_ << "key            " << printable(info.key) << '\n'
       << "mode           " << to_string(info.mode);
  if (info.limit != 0) out_ << " (semaphore of " << info.limit << ")";
  out_ << '\n'
       << "fencing token  " << info.fencing_token << '\n'
       << "owner          " << printable(info.owner_id) << '\n'
       << "session        " << printable(info.session_id) << '\n'
       << "acquired at    " << time_or_dash(info.acquired_at) << '\n'
       << "expires at     " << time_or_dash(info.expires_at) << '\n';
  // Readers and permits: every holder, each with its own token (the one above is the newest).
  if (info.mode != HoldMode::kExclusive || holders.size() > 1) {
    out_ << "holders        " << holders.size() << '\n';
    holder_table(out_, holders);
  }
  // The queue on the dlockd that answered: who is next, in what mode, waiting for how long.
  if (waiters.empty()) return;
  out_ << "waiters        " << waiters.size() << '\n';
  std::vector<std::vector<std::string>> rows = {
      {"POSITION", "OWNER", "MODE", "WAITING", "SESSION"}};
  for (const auto& waiter : waiters) {
    std::string mode = to_string(waiter.mode);
    if (waiter.limit != 0) mode += "/" + std::to_string(waiter.limit);
    rows.push_back({std::to_string(waiter.position), printable(waiter.owner_id), mode,
                    format_age(waiter.waiting),
                    waiter.session_id.empty() ? std::string("-") : printable(waiter.session_id)});
  }
  print_aligned(out_, rows);
}

void Printer::semaphore(const client::SemaphoreInfo& info) {
  if (json_) {
    boost::json::object object{{"name", info.name}, {"holders", locks_json(info.holders)}};
    if (info.limit != 0) object["limit"] = info.limit;
    out_ << boost::json::serialize(object) << '\n';
    return;
  }
  if (info.holders.empty()) {
    out_ << "semaphore " << printable(info.name) << ": no permit held\n";
    return;
  }
  out_ << "semaphore " << printable(info.name) << ": " << info.holders.size() << " of "
       << info.limit << " permits held\n";
  holder_table(out_, info.holders);
}

void Printer::locks(const client::LockPage& listed, bool every_namespace,
                    const std::optional<ListCut>& cut, WallClock::time_point now) {
  const auto& infos = listed.locks;
  const auto waiting = [&listed](std::size_t i) {
    return i < listed.waiting.size() ? listed.waiting[i] : 0;
  };
  const auto ns_of = [&listed](std::size_t i) {
    return i < listed.namespaces.size() ? listed.namespaces[i] : std::string();
  };
  if (json_) {
    boost::json::array items;
    for (std::size_t i = 0; i < infos.size(); ++i) {
      boost::json::object item = lock_json(infos[i]);
      item["waiting"] = waiting(i);
      if (every_namespace) item["ns"] = ns_of(i);
      items.push_back(std::move(item));
    }
    boost::json::object object{{"locks", std::move(items)}};
    if (cut) object["truncated"] = true;
    out_ << boost::json::serialize(object) << '\n';
    return;
  }
  if (infos.empty()) {
    out_ << "no locks held\n";
    return;
  }
  const auto cell = [](const std::string& text) {
    return text.empty() ? std::string("-") : printable(text);
  };
  std::vector<std::string> header = {"KEY",     "MODE",    "FENCING_TOKEN", "OWNER",
                                     "SESSION", "WAITERS", "AGE",           "EXPIRES_AT"};
  if (every_namespace) header.insert(header.begin(), "NAMESPACE");
  std::vector<std::vector<std::string>> rows = {std::move(header)};
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const LockInfo& info = infos[i];
    const auto age = info.acquired_at == WallClock::time_point{}
                         ? std::string("-")
                         : format_age(std::chrono::duration_cast<std::chrono::milliseconds>(
                               now - info.acquired_at));
    std::string mode = to_string(info.mode);
    if (info.limit != 0) mode += "/" + std::to_string(info.limit);
    std::vector<std::string> row = {cell(info.key),
                                    mode,
                                    std::to_string(info.fencing_token),
                                    cell(info.owner_id),
                                    cell(info.session_id),
                                    std::to_string(waiting(i)),
                                    age,
                                    time_or_dash(info.expires_at)};
    if (every_namespace) row.insert(row.begin(), cell(ns_of(i)));
    rows.push_back(std::move(row));
  }
  print_aligned(out_, rows);
  if (cut) {
    out_ << "showing the first " << cut->limit
         << (cut->more ? "; more are held" : "; there may be more")
         << ": use --all, --limit N or --prefix\n";
  }
}

void Printer::sessions(const std::vector<client::ListedSession>& listed, bool more) {
  if (json_) {
    boost::json::array items;
    for (const auto& [session, principal] : listed) {
      boost::json::object item{{"session_id", session.session_id},
                               {"owner", session.owner_id},
                               {"ttl_ms", session.ttl.count()},
                               {"lock_delay_ms", session.lock_delay.count()},
                               {"expires_at", time_or_dash(session.expires_at)}};
      if (!principal.empty()) item["principal"] = principal;
      items.push_back(std::move(item));
    }
    boost::json::object object{{"sessions", std::move(items)}};
    if (more) object["truncated"] = true;
    out_ << boost::json::serialize(object) << '\n';
    return;
  }
  if (listed.empty()) {
    out_ << "no sessions\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"SESSION", "OWNER", "PRINCIPAL", "TTL", "LOCK_DELAY", "EXPIRES_AT"}};
  const auto cell = [](const std::string& text) {
    return text.empty() ? std::string("-") : printable(text);
  };
  for (const auto& [session, principal] : listed) {
    rows.push_back({cell(session.session_id), cell(session.owner_id), cell(principal),
                    format_age(session.ttl), format_age(session.lock_delay),
                    time_or_dash(session.expires_at)});
  }
  print_aligned(out_, rows);
  if (more) out_ << "more sessions follow: use --all or --limit N\n";
}

void Printer::session_detail(const client::SessionDetail& detail) {
  const SessionInfo& session = detail.listed.session;
  if (json_) {
    boost::json::object object{{"session_id", session.session_id},
                               {"owner", session.owner_id},
                               {"ttl_ms", session.ttl.count()},
                               {"lock_delay_ms", session.lock_delay.count()},
                               {"expires_at", time_or_dash(session.expires_at)}};
    if (!detail.listed.principal.empty()) object["principal"] = detail.listed.principal;
    boost::json::array holds, waits;
    for (const auto& held : detail.holds) {
      boost::json::object item = lock_json(held.lock);
      item["ns"] = held.ns;
      holds.push_back(std::move(item));
    }
    for (const auto& wait : detail.waits) {
      boost::json::object item{{"ns", wait.ns},
                               {"key", wait.key},
                               {"mode", to_string(wait.mode)},
                               {"position", wait.position},
                               {"waiting_ms", wait.waiting.count()}};
      if (wait.limit != 0) item["limit"] = wait.limit;
      waits.push_back(std::move(item));
    }
    object["holds"] = std::move(holds);
    object["waits"] = std::move(waits);
    out_ << boost::json::serialize(object) << '\n';
    return;
  }
  const auto cell = [](const std::string& text) {
    return text.empty() ? std::string("-") : printable(text);
  };
  const auto mode_of = [](HoldMode mode, std::uint32_t limit) {
    std::string text = to_string(mode);
    if (limit != 0) text += "/" + std::to_string(limit);
    return text;
  };
  out_ << "session     " << cell(session.session_id) << '\n'
       << "owner       " << cell(session.owner_id) << '\n'
       << "principal   " << cell(detail.listed.principal) << '\n'
       << "ttl         " << format_age(session.ttl) << '\n'
       << "lock delay  " << format_age(session.lock_delay) << '\n'
       << "expires at  " << time_or_dash(session.expires_at) << '\n';
  if (detail.holds.empty()) {
    out_ << "holds       nothing\n";
  } else {
    out_ << "holds       " << detail.holds.size() << '\n';
    std::vector<std::vector<std::string>> rows = {
        {"NAMESPACE", "KEY", "MODE", "FENCING_TOKEN", "EXPIRES_AT"}};
    for (const auto& held : detail.holds) {
      rows.push_back({cell(held.ns), cell(held.lock.key), mode_of(held.lock.mode, held.lock.limit),
                      std::to_string(held.lock.fencing_token), time_or_dash(held.lock.expires_at)});
    }
    print_aligned(out_, rows);
  }
  // Waiting is per dlockd (C3 "Waiters"): another dlockd's queue is not seen from here.
  if (detail.waits.empty()) {
    out_ << "waits for   nothing on this dlockd\n";
    return;
  }
  out_ << "waits for   " << detail.waits.size() << " on this dlockd\n";
  std::vector<std::vector<std::string>> rows = {
      {"NAMESPACE", "KEY", "MODE", "POSITION", "WAITING"}};
  for (const auto& wait : detail.waits) {
    rows.push_back({cell(wait.ns), cell(wait.key), mode_of(wait.mode, wait.limit),
                    std::to_string(wait.position), format_age(wait.waiting)});
  }
  print_aligned(out_, rows);
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
    out_ << printable(key) << " was not held; nothing revoked\n";
    return;
  }
  out_ << "revoked " << printable(key);
  if (outcome.fencing_token) out_ << " (fencing token " << *outcome.fencing_token << ")";
  if (outcome.owner_id) out_ << " from " << printable(*outcome.owner_id);
  out_ << '\n';
}

void Printer::leader(const std::string& name, const std::optional<client::LeaderInfo>& leader) {
  if (json_) {
    boost::json::object object{{"name", name}, {"leader", nullptr}};
    if (leader) {
      object["leader"] = boost::json::object{{"owner", leader->owner}, {"value", leader->value}};
      object["fencing_token"] = leader->fencing_token;
      object["acquired_at"] = time_or_dash(leader->acquired_at);
      object["expires_at"] = time_or_dash(leader->expires_at);
      if (leader->session_id) object["session_id"] = *leader->session_id;
    }
    out_ << boost::json::serialize(object) << '\n';
    return;
  }
  if (!leader) {
    out_ << printable(name) << ": no leader\n";
    return;
  }
  out_ << printable(name) << ": leader " << printable(leader->owner) << "  value "
       << printable(leader->value) << "  fencing token " << leader->fencing_token << "  since "
       << time_or_dash(leader->acquired_at) << '\n';
}

void Printer::held(const std::string& key, std::chrono::milliseconds waited,
                   const std::vector<LockInfo>& holders) {
  if (json_) {
    boost::json::object object{{"key", key}, {"acquired", false}, {"error", {{"code", "held"}}}};
    if (!holders.empty()) object["holders"] = locks_json(holders);
    out_ << boost::json::serialize(object) << '\n';
    return;
  }
  out_ << printable(key) << " is " << held_by(holders) << "; not acquired within "
       << client::format_duration(waited) << '\n';
}

}  // namespace dlock::cli
