#pragma once

// How the CLI prints results: aligned human text by default, every string in it through
// printable() (cli/terminal_text.h: control characters shown as escapes, on a terminal or not);
// one JSON document with --json, values exact (the same field names as the C3 responses, so
// scripts can switch between them).

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "dlock/client.h"

namespace dlock::cli {

// A list answer cut at `limit` locks: `more` when more are known to exist, else there may be.
struct ListCut {
  std::size_t limit = 0;
  bool more = false;
};

// "42s", "5m07s", "3h12m", "2d04h": how long ago, to the unit that matters.
std::string format_age(std::chrono::milliseconds age);

class Printer {
 public:
  Printer(std::ostream& out, bool json) : out_(out), json_(json) {}

  void session(const SessionInfo& info);
  void keepalive(const SessionInfo& info);
  void session_closed(const std::string& session_id);
  // `limit`: a permit's semaphore size (0 for a lock).
  void granted(const LockHandle& handle, const std::string& ns, std::uint32_t limit = 0);
  void extended(const std::string& key, const client::ExtendResult& result);
  void released(const std::string& key, FencingToken token);
  // `holders`: every live holder of `key` (empty: free); the greatest token first, then each.
  // `dlock sessions`: aligned columns SESSION OWNER PRINCIPAL TTL LOCK_DELAY EXPIRES_AT, and a
  // last line when more were not shown.
  void sessions(const std::vector<client::ListedSession>& listed, bool more);
  // `dlock session show`: the session, then aligned tables of what it holds (NAMESPACE KEY MODE
  // FENCING_TOKEN EXPIRES_AT) and waits for on the dlockd that answered (NAMESPACE KEY MODE
  // POSITION WAITING); JSON: C3's answer.
  void session_detail(const client::SessionDetail& detail);
  // `dlock get`: the holders and, on the server that answered, the waiters (C3 "Waiters").
  void lock(const std::string& key, const std::vector<LockInfo>& holders,
            const std::vector<client::Waiter>& waiters = {});
  void semaphore(const client::SemaphoreInfo& info);
  // `dlock list`: aligned columns [NAMESPACE] KEY MODE FENCING_TOKEN OWNER SESSION WAITERS AGE
  // EXPIRES_AT (NAMESPACE with `every_namespace`; WAITERS: acquires waiting on the dlockd that
  // answered; AGE = `now` - acquired_at). `cut`: the answer stopped at a limit, and a last line
  // says so. JSON: {"locks": [C3's list entries]}.
  void locks(const client::LockPage& listed, bool every_namespace,
             const std::optional<ListCut>& cut = {}, WallClock::time_point now = WallClock::now());
  void revoked(const std::string& key, const LockOutcome& outcome);
  // An election's leader, or that nobody leads (`leader` empty). Text: one line, the same for
  // each change `dlock leader --watch` prints; JSON: one document per line, C3's read answer
  // ("leader": null when nobody leads).
  void leader(const std::string& name, const std::optional<client::LeaderInfo>& leader);
  // "held" for acquire: printed on stdout in JSON so scripts see a document either way.
  // `holders`: who holds it, when known (text: named, JSON: "holders").
  void held(const std::string& key, std::chrono::milliseconds waited,
            const std::vector<LockInfo>& holders = {});

 private:
  std::ostream& out_;
  bool json_;
};

}  // namespace dlock::cli
