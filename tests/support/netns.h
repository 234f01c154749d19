#pragma once

// Network partitions on this machine only: network namespaces and veth pairs the test creates
// itself, addresses from one private block (10.213.X.0/24, X derived from the test's pid so two
// runs never share an address), no forwarding and no route to anywhere else. A partition is a
// link taken down or a blackhole route; everything is torn down on destruction, and namespaces
// a killed run left behind are removed by remove_stale_namespaces() (their names carry the pid).
//
// Processes inside a namespace are started with wrap(argv) ("ip netns exec NAME argv...").
// Services that only listen on the test's loopback (the PostgreSQL and etcd fixtures) are made
// reachable from a namespace through a TcpRelay listening on a veth address.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlock::testing {

// Runs `ip ARGS...` to completion; throws std::runtime_error with its output when it fails.
void run_ip(const std::vector<std::string>& args);

// Deletes every namespace named "dlock-<pid>-..." whose creating process no longer exists.
void remove_stale_namespaces();

// Eight addresses (a /29) of this run's private /24; host(1..6) are usable.
struct Subnet {
  std::string prefix;  // e.g. "10.213.57.8"
  int base = 0;
  std::string host(int index) const;  // "10.213.57.9" for index 1
  std::string cidr(int index) const;  // "10.213.57.9/29"
  static Subnet next();               // a /29 not handed out before in this process
};

class NetNamespace {
 public:
  // Creates "dlock-<pid>-<n>-<role>" with its loopback up.
  explicit NetNamespace(const std::string& role);
  NetNamespace(const NetNamespace&) = delete;
  NetNamespace& operator=(const NetNamespace&) = delete;
  ~NetNamespace();

  const std::string& name() const { return name_; }
  // {"ip", "netns", "exec", NAME, argv...}: argv run inside this namespace.
  std::vector<std::string> wrap(const std::vector<std::string>& argv) const;
  // `ip -n NAME ARGS...`
  void ip(const std::vector<std::string>& args) const;

  // Drops (silently, as a cut cable does) every packet this namespace sends to `address`;
  // unblock() lifts it. Longest prefix wins, so a /32 blackhole beats the connected route.
  void block(const std::string& address) const;
  void unblock(const std::string& address) const;

 private:
  std::string name_;
};

// A veth pair: end `a` in namespace `a_ns` (nullptr = the test's own namespace), end `b` in
// `b_ns`, each given an address (CIDR, or "" for none). Deleted on destruction.
class Veth {
 public:
  Veth(const NetNamespace* a_ns, const std::string& a_cidr, const NetNamespace* b_ns,
       const std::string& b_cidr);
  Veth(const Veth&) = delete;
  Veth& operator=(const Veth&) = delete;
  ~Veth();

  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  // Adds another address to end a (e.g. a service address next to the primary one).
  void add_address_a(const std::string& cidr) const;
  // Takes one end down or brings it up again. With end a down, what the other side sends
  // vanishes silently (its end only loses carrier, its route stays): the cut cable of a real
  // partition, which a caller notices only through its own timeouts. End a's addresses stay
  // reachable from end a's own namespace.
  void set_a_up(bool up) const;
  void set_b_up(bool up) const;

 private:
  std::vector<std::string> on(const NetNamespace* ns, std::vector<std::string> args) const;

  const NetNamespace* a_ns_;
  const NetNamespace* b_ns_;
  std::string a_;
  std::string b_;
};

// Forwards every TCP connection accepted on listen_host:port to target_host:target_port,
// byte for byte, in both directions, on threads of the test process. Stopped on destruction.
class TcpRelay {
 public:
  TcpRelay(const std::string& listen_host, const std::string& target_host, int target_port);
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;
  ~TcpRelay();

  int port() const { return port_; }
  std::string address() const { return listen_host_ + ":" + std::to_string(port_); }

 private:
  void accept_loop();
  void pump(int client, int upstream);

  std::string listen_host_;
  std::string target_host_;
  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace dlock::testing
