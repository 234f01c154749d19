// Client::watch: GET /v1/watch, one long poll of a key's or a prefix's events (C3 "Watch").

#include <boost/json/serialize.hpp>

#include "client/client_core.h"
#include "client/error_mapping.h"
#include "client/json_codec.h"
#include "client/url.h"

namespace dlock::client {
namespace {

namespace json = boost::json;

WatchEvent decode_event(const json::object& object) {
  WatchEvent event;
  event.position = detail::string_member(object, "position");
  event.kind = detail::string_member(object, "kind");
  event.ns = detail::string_member(object, "ns", false);
  event.key = detail::string_member(object, "key", false);
  event.owner = detail::string_member(object, "owner", false);
  event.mode = detail::string_member(object, "mode", false);
  event.reason = detail::string_member(object, "reason", false);
  if (object.contains("fencing_token")) {
    event.fencing_token = detail::uint_member(object, "fencing_token");
  }
  if (object.contains("session_id")) event.session_id = detail::string_member(object, "session_id");
  event.at = detail::time_member(object, "at");
  event.json = json::serialize(object);
  return event;
}

}  // namespace

WatchPage Client::watch(const std::string& target, bool prefix, const std::string& after,
                        std::chrono::milliseconds wait, const std::string& ns, Deadline deadline) {
  const std::string what = "watch " + target;
  // Built by hand: an empty prefix (the whole namespace) is a parameter too.
  std::string url =
      std::string("/v1/watch?") + (prefix ? "prefix=" : "key=") + detail::percent_encode(target);
  const std::vector<std::pair<std::string, std::string>> rest{
      {"ns", ns},
      {"after", after},
      {"wait_ms", wait.count() > 0 ? std::to_string(wait.count()) : std::string()}};
  const auto tail = detail::query_string(rest);
  if (!tail.empty()) url += "&" + tail.substr(1);
  auto context = core_->context(core_->deadline_from(deadline, wait));
  // The server may hold the poll for `wait` before it answers (ADR-0012, as observe).
  context.attempt_slack = std::max(context.attempt_slack, wait);
  const detail::Exchange exchange =
      core_->call(detail::HttpRequest{detail::Method::kGet, url, {}, {}}, context, what);
  if (exchange.response.status != 200) {
    detail::throw_api_error(detail::parse_api_error(exchange.response), what);
  }
  const json::object body = detail::parse_object(exchange.response.body, what);
  WatchPage page;
  page.next = detail::string_member(body, "next");
  const auto* events = body.if_contains("events");
  if (events == nullptr || !events->is_array()) {
    throw InternalError(what + ": the answer has no events array");
  }
  for (const auto& event : events->as_array()) {
    if (!event.is_object()) throw InternalError(what + ": an event is not an object");
    page.events.push_back(decode_event(event.as_object()));
  }
  return page;
}

}  // namespace dlock::client
