#include "cost.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "http_connection.h"
#include "scenarios.h"
#include "support/subprocess.h"

namespace dlock::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using http_detail::json_number_field;
using http_detail::json_string_field;

// One keep-alive connection, one request at a time: the client's own cost stays out of dlockd's.
class SerialClient {
 public:
  explicit SerialClient(const std::string& address) : socket_(io_) {
    const auto colon = address.rfind(':');
    socket_.connect({asio::ip::make_address(address.substr(0, colon)),
                     static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))});
    socket_.set_option(tcp::no_delay(true));
    host_ = address;
  }

  std::string call(http::verb verb, const std::string& target, const std::string& body,
                   int expected) {
    http::request<http::string_body> request{verb, target, 11};
    request.set(http::field::host, host_);
    request.keep_alive(true);
    if (!body.empty()) {
      request.set(http::field::content_type, "application/json");
      request.body() = body;
    }
    request.prepare_payload();
    http::write(socket_, request);
    http::response<http::string_body> response;
    http::read(socket_, buffer_, response);
    if (static_cast<int>(response.result_int()) != expected) {
      throw std::runtime_error("cost: " + target + " answered " +
                               std::to_string(response.result_int()) + ": " + response.body());
    }
    return response.body();
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::string host_;
};

// `cycles` acquire + release pairs of one key by one session.
void run_cycles(SerialClient& client, const std::string& session_id, int cycles) {
  const std::string acquire = R"({"session_id":")" + session_id + R"(","ttl_ms":60000})";
  for (int i = 0; i < cycles; ++i) {
    const std::string granted =
        client.call(http::verb::post, "/v1/locks/cost-key/acquire", acquire, 200);
    client.call(http::verb::delete_,
                "/v1/locks/cost-key?session_id=" + session_id +
                    "&fencing_token=" + json_number_field(granted, "fencing_token"),
                "", 204);
  }
}

std::string open_session(SerialClient& client) {
  const std::string opened =
      client.call(http::verb::post, "/v1/sessions", R"({"owner":"cost","ttl_ms":3600000})", 201);
  return json_string_field(opened, "session_id");
}

// The instructions (Ir) of callgrind's newest dump in `dir`.
double dumped_instructions(const std::string& dir) {
  std::filesystem::path newest;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("callgrind.out", 0) != 0) continue;
    if (newest.empty() ||
        std::filesystem::last_write_time(entry) > std::filesystem::last_write_time(newest)) {
      newest = entry.path();
    }
  }
  std::ifstream in(newest);
  for (std::string line; std::getline(in, line);) {
    for (const char* label : {"summary: ", "totals: "}) {
      if (line.rfind(label, 0) == 0) return std::stod(line.substr(std::string(label).size()));
    }
  }
  throw std::runtime_error("cost: no instruction total in " + newest.string());
}

void callgrind_control(const std::string& flag, pid_t pid, const std::string& dir) {
  testing::SubprocessOptions command;
  command.argv = {"/usr/bin/callgrind_control", flag, std::to_string(pid)};
  command.log_path = dir + "/callgrind_control.log";
  if (testing::run_command(command, std::chrono::seconds(60)) != 0) {
    throw std::runtime_error("cost: callgrind_control " + flag + " failed (" + command.log_path +
                             ")");
  }
}

}  // namespace

GrantCost grant_cost(const testing::DlockdOptions& options, const std::string& work_dir,
                     int cpu_cycles, int instruction_cycles) {
  GrantCost cost;
  cost.cpu_cycles = cpu_cycles;
  {
    testing::DlockdProcess dlockd(options);
    SerialClient client(dlockd.address());
    const std::string session = open_session(client);
    run_cycles(client, session, std::max(1, cpu_cycles / 10));  // warm: connection, caches
    const double cpu0 = cpu_seconds(dlockd.pid());
    const auto started = std::chrono::steady_clock::now();
    run_cycles(client, session, cpu_cycles);
    const std::chrono::duration<double, std::micro> wall =
        std::chrono::steady_clock::now() - started;
    cost.cpu_us_per_grant = (cpu_seconds(dlockd.pid()) - cpu0) * 1e6 / cpu_cycles;
    cost.wall_us_per_grant = wall.count() / cpu_cycles;
  }
  if (instruction_cycles <= 0 || !std::filesystem::exists("/usr/bin/valgrind") ||
      !std::filesystem::exists("/usr/bin/callgrind_control")) {
    return cost;
  }
  const std::string dir = work_dir + "/callgrind-" + options.backend;
  std::filesystem::create_directories(dir);
  testing::DlockdOptions traced = options;
  traced.wrapper = {"/usr/bin/valgrind", "--tool=callgrind", "-q",
                    "--callgrind-out-file=" + dir + "/callgrind.out.%p"};
  testing::DlockdProcess dlockd(traced);
  SerialClient client(dlockd.address());
  const std::string session = open_session(client);
  run_cycles(client, session, std::max(1, instruction_cycles / 10));
  callgrind_control("-z", dlockd.pid(), dir);
  run_cycles(client, session, instruction_cycles);
  callgrind_control("-d", dlockd.pid(), dir);
  cost.instructions_per_grant = dumped_instructions(dir) / instruction_cycles;
  cost.instruction_cycles = instruction_cycles;
  return cost;
}

}  // namespace dlock::bench
