#include "support/netns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "support/subprocess.h"

namespace dlock::testing {
namespace {

constexpr const char* kIp = "/usr/sbin/ip";
constexpr const char* kPrefix = "dlock-";

std::atomic<int> next_id{0};

// 10.213.X.0/24 with X in 100..249 from the pid: concurrent runs (a sanitizer pass next to the
// normal one) use different blocks, as the root namespace's veth ends share one address space.
int block_of_this_run() { return 100 + static_cast<int>(getpid() % 150); }

sockaddr_in socket_address(const std::string& host, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    throw std::invalid_argument("not an IPv4 address: " + host);
  }
  return address;
}

bool write_all(int fd, const char* data, ssize_t size) {
  while (size > 0) {
    const ssize_t written = send(fd, data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    data += written;
    size -= written;
  }
  return true;
}

}  // namespace

void run_ip(const std::vector<std::string>& args) {
  const std::string dir = make_temp_dir("dlock-ip");
  SubprocessOptions options;
  options.argv = {kIp};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.log_path = dir + "/out";
  const int status = run_command(options, std::chrono::seconds(30));
  std::stringstream output;
  output << std::ifstream(options.log_path).rdbuf();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (status != 0) {
    std::string command = "ip";
    for (const auto& arg : args) command += " " + arg;
    throw std::runtime_error(command + " failed (" + std::to_string(status) + "): " + output.str());
  }
}

void remove_stale_namespaces() {
  // `ip netns add` keeps one bind mount per namespace here.
  const std::filesystem::path dir("/run/netns");
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(std::strlen(kPrefix));
    const std::string digits = rest.substr(0, rest.find('-'));
    // Only names this fixture makes ("dlock-<pid>-<n>-<role>"); anything else is not ours.
    if (digits.empty() || rest.size() == digits.size() ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::atol(digits.c_str()));
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      try {
        run_ip({"netns", "delete", name});
      } catch (const std::exception&) {
        // Another run may be deleting it at the same moment.
      }
    }
  }
}

std::string Subnet::host(int index) const {
  return "10.213." + std::to_string(block_of_this_run()) + "." + std::to_string(base + index);
}

std::string Subnet::cidr(int index) const { return host(index) + "/29"; }

Subnet Subnet::next() {
  static std::atomic<int> counter{0};
  Subnet subnet;
  subnet.base = 8 * (counter++ % 32);
  subnet.prefix = subnet.host(0);
  return subnet;
}

NetNamespace::NetNamespace(const std::string& role)
    : name_(kPrefix + std::to_string(getpid()) + "-" + std::to_string(next_id++) + "-" + role) {
  run_ip({"netns", "add", name_});
  try {
    ip({"link", "set", "lo", "up"});
  } catch (...) {
    run_ip({"netns", "delete", name_});
    throw;
  }
}

NetNamespace::~NetNamespace() {
  try {
    run_ip({"netns", "delete", name_});  // also deletes every veth end inside (and its peer)
  } catch (const std::exception&) {
    // Nothing more to do in a destructor; remove_stale_namespaces() catches it next run.
  }
}

std::vector<std::string> NetNamespace::wrap(const std::vector<std::string>& argv) const {
  std::vector<std::string> wrapped = {kIp, "netns", "exec", name_};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

void NetNamespace::ip(const std::vector<std::string>& args) const {
  std::vector<std::string> all = {"-n", name_};
  all.insert(all.end(), args.begin(), args.end());
  run_ip(all);
}

void NetNamespace::block(const std::string& address) const {
  ip({"route", "add", "blackhole", address + "/32"});
}

void NetNamespace::unblock(const std::string& address) const {
  ip({"route", "del", "blackhole", address + "/32"});
}

Veth::Veth(const NetNamespace* a_ns, const std::string& a_cidr, const NetNamespace* b_ns,
           const std::string& b_cidr)
    : a_ns_(a_ns), b_ns_(b_ns) {
  const std::string id = "dk" + std::to_string(getpid()) + "v" + std::to_string(next_id++);
  a_ = id + "a";
  b_ = id + "b";
  std::vector<std::string> add = {"link", "add", a_};
  if (a_ns_ != nullptr) add.insert(add.end(), {"netns", a_ns_->name()});
  add.insert(add.end(), {"type", "veth", "peer", "name", b_});
  if (b_ns_ != nullptr) add.insert(add.end(), {"netns", b_ns_->name()});
  run_ip(add);
  if (!a_cidr.empty()) run_ip(on(a_ns_, {"addr", "add", a_cidr, "dev", a_}));
  if (!b_cidr.empty()) run_ip(on(b_ns_, {"addr", "add", b_cidr, "dev", b_}));
  run_ip(on(a_ns_, {"link", "set", a_, "up"}));
  run_ip(on(b_ns_, {"link", "set", b_, "up"}));
}

Veth::~Veth() {
  try {
    run_ip(on(a_ns_, {"link", "del", a_}));
  } catch (const std::exception&) {
    // Already gone with its namespace.
  }
}

std::vector<std::string> Veth::on(const NetNamespace* ns, std::vector<std::string> args) const {
  if (ns != nullptr) args.insert(args.begin(), {"-n", ns->name()});
  return args;
}

void Veth::add_address_a(const std::string& cidr) const {
  run_ip(on(a_ns_, {"addr", "add", cidr, "dev", a_}));
}

void Veth::set_a_up(bool up) const { run_ip(on(a_ns_, {"link", "set", a_, up ? "up" : "down"})); }

void Veth::set_b_up(bool up) const { run_ip(on(b_ns_, {"link", "set", b_, up ? "up" : "down"})); }

TcpRelay::TcpRelay(const std::string& listen_host, const std::string& target_host, int target_port)
    : listen_host_(listen_host), target_host_(target_host), target_port_(target_port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  auto address = socket_address(listen_host_, 0);
  socklen_t length = sizeof(address);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listen_fd_, 64) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string message = std::strerror(errno);
    if (listen_fd_ >= 0) close(listen_fd_);
    throw std::runtime_error("relay cannot listen on " + listen_host_ + ": " + message);
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpRelay::~TcpRelay() {
  stopping_ = true;
  acceptor_.join();
  close(listen_fd_);
  std::lock_guard lock(mutex_);
  for (auto& thread : threads_) thread.join();
}

void TcpRelay::accept_loop() {
  while (!stopping_) {
    pollfd waiting{listen_fd_, POLLIN, 0};
    if (poll(&waiting, 1, 100) <= 0) continue;
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const auto target = socket_address(target_host_, target_port_);
    if (upstream < 0 ||
        connect(upstream, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
      close(client);  // the target is down: the client sees a reset, as it would directly
      if (upstream >= 0) close(upstream);
      continue;
    }
    const int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard lock(mutex_);
    threads_.emplace_back([this, client, upstream] { pump(client, upstream); });
  }
}

void TcpRelay::pump(int client, int upstream) {
  pollfd fds[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
  char buffer[16384];
  bool open = true;
  while (open && !stopping_) {
    if (poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2 && open; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = recv(fds[i].fd, buffer, sizeof(buffer), 0);
      if (got < 0 && errno == EINTR) continue;
      open = got > 0 && write_all(fds[1 - i].fd, buffer, got);
    }
  }
  close(client);
  close(upstream);
}

}  // namespace dlock::testing
