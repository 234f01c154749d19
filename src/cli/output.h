#pragma once

// How the CLI prints results: aligned human text by default, one JSON document with --json
// (the same field names as the C3 responses, so scripts can switch between them).

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "dlock/client.h"

namespace dlock::cli {

class Printer {
 public:
  Printer(std::ostream& out, bool json) : out_(out), json_(json) {}

  void session(const SessionInfo& info);
  void keepalive(const SessionInfo& info);
  void session_closed(const std::string& session_id);
  void granted(const LockHandle& handle, const std::string& ns);
  void extended(const std::string& key, const client::ExtendResult& result);
  void released(const std::string& key, FencingToken token);
  void lock(const std::string& key, const std::optional<LockInfo>& info);
  void locks(const std::vector<LockInfo>& infos);
  void revoked(const std::string& key, const LockOutcome& outcome);
  // "held" for acquire: printed on stdout in JSON so scripts see a document either way.
  void held(const std::string& key, std::chrono::milliseconds waited);

 private:
  std::ostream& out_;
  bool json_;
};

}  // namespace dlock::cli
