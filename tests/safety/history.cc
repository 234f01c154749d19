#include "safety/history.h"

#include <boost/json.hpp>
#include <chrono>
#include <fstream>
#include <map>

namespace dlock::safety {
namespace {

namespace json = boost::json;

std::string text_of(const json::object& event, const char* name) {
  const auto* value = event.if_contains(name);
  if (value == nullptr) return "";
  if (value->is_string()) return std::string(value->as_string());
  return json::serialize(*value);
}

std::int64_t int_of(const json::object& event, const char* name) {
  const auto* value = event.if_contains(name);
  return value != nullptr && value->is_number() ? value->to_number<std::int64_t>() : 0;
}

template <typename Visit>
void for_each_event(const std::string& path, Visit visit) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() != '{') continue;
    boost::system::error_code error;
    auto value = json::parse(line, error);
    if (error || !value.is_object()) continue;  // e.g. a line cut by SIGKILL
    visit(value.as_object());
  }
}

}  // namespace

const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kFail:
      return "fail";
    case Outcome::kUnknown:
      return "unknown";
  }
  return "?";
}

std::int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void History::load_executor_log(const std::string& path, const std::string& process) {
  for_each_event(path, [&](const json::object& event) {
    const std::string kind = text_of(event, "event");
    if (kind != "acquire" && kind != "release" && kind != "write" && kind != "read") return;
    Operation operation;
    operation.process = process;
    operation.kind = kind;
    operation.session = text_of(event, "session");
    const bool resource = kind == "write" || kind == "read";
    operation.key = resource ? text_of(event, "batch") : text_of(event, "key");
    operation.shared = text_of(event, "mode") == "shared";
    operation.start_ns = int_of(event, "start");
    operation.end_ns = int_of(event, "end");
    operation.token = static_cast<std::uint64_t>(int_of(event, "token"));
    operation.promised_until_ns = int_of(event, "promised_until");
    operation.payout = text_of(event, "payout");
    operation.detail = text_of(event, "message");
    const std::string outcome = text_of(event, "outcome");
    operation.rejected = outcome == "rejected";
    operation.outcome = outcome == "ok"        ? Outcome::kOk
                        : outcome == "unknown" ? Outcome::kUnknown
                                               : Outcome::kFail;
    add(std::move(operation));
  });
}

int count_events(const std::string& path, const std::string& event, const std::string& outcome) {
  int count = 0;
  for_each_event(path, [&](const json::object& line) {
    if (text_of(line, "event") == event && (outcome.empty() || text_of(line, "outcome") == outcome))
      ++count;
  });
  return count;
}

std::vector<std::string> reissued_tokens(const std::vector<Operation>& operations,
                                         bool batched_revisions) {
  std::map<std::uint64_t, std::vector<const Operation*>> by_token;
  std::vector<std::string> found;
  for (const auto& op : operations) {
    if (op.kind != "acquire" || op.outcome != Outcome::kOk) continue;
    auto& earlier = by_token[op.token];
    for (const Operation* other : earlier) {
      const bool overlapped = other->start_ns <= op.end_ns && op.start_ns <= other->end_ns;
      if (other->key == op.key || !batched_revisions || !overlapped) {
        found.push_back("token " + std::to_string(op.token) + " granted twice: to " +
                        other->process + " " + other->key + " and to " + op.process + " " + op.key +
                        (overlapped ? "" : " (the calls did not overlap)"));
      }
    }
    earlier.push_back(&op);
  }
  return found;
}

}  // namespace dlock::safety
