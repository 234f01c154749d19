#include "support/dlockd_process.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dlock::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

DlockdProcess::DlockdProcess(DlockdOptions options) : options_(std::move(options)) {
  own_dir_ = options_.dir.empty();
  dir_ = own_dir_ ? make_temp_dir("dlockd") : options_.dir;
  log_path_ = dir_ + "/dlockd.log";
  if (options_.backend == "sqlite" && options_.sqlite_path.empty()) {
    options_.sqlite_path = dir_ + "/dlock.db";
  }
  if (options_.fixed_port) port_ = free_loopback_port();
  start();
}

DlockdProcess::~DlockdProcess() {
  process_.reset();  // SIGKILL + reap if still running
  if (own_dir_) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

void DlockdProcess::kill9() {
  if (process_) process_->kill_now();
}

void DlockdProcess::start() {
  process_.reset();
  const std::string ready_file = dir_ + "/ready";
  std::error_code ignored;
  std::filesystem::remove(ready_file, ignored);
  SubprocessOptions process;
  process.argv = options_.wrapper;
  process.argv.insert(
      process.argv.end(),
      {options_.binary, "--lock-backend", options_.backend, "--server-listen",
       options_.listen_host + ":" + std::to_string(port_), "--log-level", options_.log_level});
  if (!options_.fixed_port)
    process.argv.insert(process.argv.end(), {"--server-ready-file", ready_file});
  // A test network namespace's address is not loopback: say so explicitly (C6 safe default).
  if (options_.insecure_off_loopback && options_.listen_host.rfind("127.", 0) != 0)
    process.argv.insert(process.argv.end(), {"--server-insecure", "true"});
  if (!options_.sqlite_path.empty())
    process.argv.insert(process.argv.end(), {"--sqlite-path", options_.sqlite_path});
  if (!options_.pg_url.empty())
    process.argv.insert(process.argv.end(), {"--pg-url", options_.pg_url});
  if (!options_.etcd_endpoints.empty())
    process.argv.insert(process.argv.end(), {"--etcd-endpoints", options_.etcd_endpoints});
  process.argv.insert(process.argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  process.env = options_.env;
  process.log_path = log_path_;
  process.stdout_fd = options_.stdout_fd;
  process_ = std::make_unique<Subprocess>(process);
  bool ready = false;
  if (options_.fixed_port) {
    address_ = options_.listen_host + ":" + std::to_string(port_);
    ready = wait_for(
        [&] {
          if (!process_->running()) return true;
          try {
            return http_call(address_, "GET", "/readyz").status == 200;
          } catch (const std::exception&) {
            return false;  // not listening yet
          }
        },
        std::chrono::seconds(30), std::chrono::milliseconds(20));
    ready = ready && process_->running();
  } else {
    ready = wait_for([&] { return !process_->running() || std::filesystem::exists(ready_file); },
                     std::chrono::seconds(30));
    address_.clear();
    std::ifstream in(ready_file);
    std::getline(in >> std::ws, address_);
    ready = ready && !address_.empty();
  }
  if (!ready) {
    std::ifstream log(log_path_);
    std::stringstream text;
    text << log.rdbuf();
    throw std::runtime_error("dlockd did not start: " + text.str());
  }
}

std::string HttpResult::error_code() const {
  if (!json.is_object()) return "";
  const auto* error = json.as_object().if_contains("error");
  if (error == nullptr || !error->is_object()) return "";
  const auto* code = error->as_object().if_contains("code");
  return code != nullptr && code->is_string() ? std::string(code->as_string()) : "";
}

HttpResult http_call(const std::string& address, const std::string& method,
                     const std::string& target, const std::string& body,
                     const std::map<std::string, std::string>& headers,
                     std::chrono::milliseconds timeout) {
  const auto colon = address.rfind(':');
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(timeout);  // the whole call: connect, write and read
  boost::system::error_code error;
  // Runs one asynchronous step to its end (or the deadline: beast::error::timeout).
  const auto step = [&](auto start) {
    start([&](boost::system::error_code ec, auto&&...) { error = ec; });
    io.restart();
    io.run();
  };
  const asio::ip::tcp::endpoint endpoint{
      asio::ip::make_address(address.substr(0, colon)),
      static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))};
  step([&](auto done) { stream.async_connect(endpoint, done); });
  if (error) throw std::runtime_error("connect " + address + ": " + error.message());
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  request.set(http::field::host, address);
  if (!body.empty()) request.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = body;
  request.prepare_payload();
  step([&](auto done) { http::async_write(stream, request, done); });
  if (error) throw std::runtime_error("write: " + error.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  step([&](auto done) { http::async_read(stream, buffer, parser, done); });
  if (error) throw std::runtime_error("read: " + error.message());
  const auto& response = parser.get();
  HttpResult result;
  result.status = response.result_int();
  result.body = response.body();
  for (const auto& field : response) {
    std::string name(field.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    result.headers[name] = std::string(field.value());
  }
  boost::system::error_code json_error;
  if (!result.body.empty()) {
    auto parsed = boost::json::parse(result.body, json_error);
    if (!json_error) result.json = std::move(parsed);
  }
  return result;
}

long waiting_acquires(const std::string& address) {
  const auto body = http_call(address, "GET", "/metrics").body;
  const auto series = body.find("\ndlock_waiters{");
  if (series == std::string::npos) return -1;
  const auto value = body.find("} ", series);
  if (value == std::string::npos) return -1;
  return std::strtol(body.c_str() + value + 2, nullptr, 10);
}

}  // namespace dlock::testing
