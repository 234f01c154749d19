// The web console's files at /ui/ (docs/console.md, ADR-0033): static, built into the binary
// (src/console), public like /healthz — they hold no data and no secret; every /v1 call the page
// makes is authenticated and authorized as any other (C6). Each answer carries a strict
// Content-Security-Policy: scripts, styles and fetches from this origin only, no inline script
// or style, no framing, and Trusted Types required, so a string assigned to innerHTML throws.

#include <string>
#include <string_view>

#include "console/console_files.h"
#include "server/api.h"

namespace dlock::server {
namespace {

namespace http = boost::beast::http;

constexpr std::string_view kPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'";

Response console_response(http::status status, std::string_view type, std::string body) {
  Response response{status, 11};
  response.set(http::field::server, "dlockd");
  response.set(http::field::content_type, type);
  response.set("Content-Security-Policy", kPolicy);
  response.set("X-Content-Type-Options", "nosniff");
  response.set("X-Frame-Options", "DENY");
  response.set("Referrer-Policy", "no-referrer");
  response.set("Cross-Origin-Opener-Policy", "same-origin");
  response.set("Cross-Origin-Resource-Policy", "same-origin");
  response.set(http::field::cache_control, "no-cache");
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

}  // namespace

void Api::console_root(const RequestContext&, const Reply& reply) {
  auto response = console_response(http::status::moved_permanently, "text/plain; charset=utf-8",
                                   "the console is at /ui/\n");
  response.set(http::field::location, "/ui/");
  reply(std::move(response));
}

void Api::console(const RequestContext& context, const Reply& reply) {
  const std::string& name = context.params.at(0);
  const auto* file = console::find(name.empty() ? "index.html" : name);
  if (file == nullptr) {
    return reply(console_response(http::status::not_found, "text/plain; charset=utf-8",
                                  "no such console file\n"));
  }
  reply(console_response(http::status::ok, file->content_type, std::string(file->content)));
}

}  // namespace dlock::server
