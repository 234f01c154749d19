#include "safety/recorder.h"

#include <boost/json.hpp>
#include <stdexcept>

namespace dlock::safety {

namespace json = boost::json;

void note_answer(Operation& op, const testing::HttpResult& result) {
  if (op.outcome != Outcome::kOk || !result.json.is_object()) return;
  const auto& body = result.json.as_object();
  if (body.contains("fencing_token")) {
    op.token = body.at("fencing_token").to_number<std::uint64_t>();
  }
  if (body.contains("ttl_ms")) {
    op.promised_until_ns = op.start_ns + body.at("ttl_ms").to_number<std::int64_t>() * 1000000;
  }
}

std::map<std::string, std::string> bearer_headers(const std::string& bearer) {
  if (bearer.empty()) return {};
  return {{"Authorization", "Bearer " + bearer}};
}

std::string open_session(const std::string& address, int ttl_ms, const std::string& bearer) {
  const auto result =
      testing::http_call(address, "POST", "/v1/sessions",
                         json::serialize(json::object{{"owner", "safety"}, {"ttl_ms", ttl_ms}}),
                         bearer_headers(bearer));
  if (result.status != 201) throw std::runtime_error("open session: " + result.body);
  return std::string(result.json.at("session_id").as_string());
}

std::uint64_t token_of(const testing::HttpResult& result) {
  return result.json.at("fencing_token").to_number<std::uint64_t>();
}

Recorder::Recorder(History& history, std::string address, Send send, std::string bearer)
    : history_(history), address_(std::move(address)), send_(std::move(send)) {
  if (!send_) {
    send_ = [headers = bearer_headers(bearer)](const std::string& to, const std::string& method,
                                               const std::string& target, const std::string& body) {
      return testing::http_call(to, method, target, body, headers);
    };
  }
}

testing::HttpResult Recorder::call_at(const std::string& address, const std::string& process,
                                      const std::string& session, const std::string& key,
                                      const std::string& kind, const std::string& method,
                                      const std::string& target, const std::string& body,
                                      std::uint64_t token) {
  Operation op;
  op.process = process;
  op.session = session;
  op.key = key;
  op.kind = kind;
  op.start_ns = monotonic_ns();
  testing::HttpResult result;
  try {
    result = send_(address, method, target, body);
    op.outcome = result.status / 100 == 2 ? Outcome::kOk : Outcome::kFail;
    op.detail = std::to_string(result.status) + " " + result.error_code();
  } catch (const std::exception& error) {
    op.outcome = Outcome::kUnknown;
    op.detail = error.what();
  }
  op.end_ns = monotonic_ns();
  op.token = token;
  note_answer(op, result);
  std::lock_guard lock(mutex_);
  last_ = op;
  history_.add(op);
  return result;
}

testing::HttpResult Recorder::acquire_at(const std::string& address, const std::string& process,
                                         const std::string& session, const std::string& key,
                                         int ttl_ms, int wait_ms) {
  return call_at(address, process, session, key, "acquire", "POST", "/v1/locks/" + key + "/acquire",
                 json::serialize(json::object{
                     {"session_id", session}, {"ttl_ms", ttl_ms}, {"wait_ms", wait_ms}}));
}

testing::HttpResult Recorder::extend_at(const std::string& address, const std::string& process,
                                        const std::string& session, const std::string& key,
                                        std::uint64_t token, int ttl_ms) {
  return call_at(address, process, session, key, "extend", "POST", "/v1/locks/" + key + "/extend",
                 json::serialize(json::object{
                     {"session_id", session}, {"fencing_token", token}, {"ttl_ms", ttl_ms}}),
                 token);
}

testing::HttpResult Recorder::release_at(const std::string& address, const std::string& process,
                                         const std::string& session, const std::string& key,
                                         std::uint64_t token) {
  return call_at(
      address, process, session, key, "release", "DELETE",
      "/v1/locks/" + key + "?session_id=" + session + "&fencing_token=" + std::to_string(token), "",
      token);
}

Operation Recorder::last() const {
  std::lock_guard lock(mutex_);
  return last_;
}

}  // namespace dlock::safety
