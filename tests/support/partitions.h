#pragma once

// The network partitions of the tests, on network namespaces (netns.h): a dlockd on a network of
// its own whose cables to its clients and to its backend can be cut, and a three-member etcd
// cluster whose members can be cut off from one another. Shared by the safety suite's partition
// scenarios (tests/safety/partition_fault_test.cc, h and i) and the linearizability workload's
// partition faults (tests/linearizability/workload/nemesis.h). Root only: callers check
// geteuid() first.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/dlockd_process.h"
#include "support/netns.h"
#ifdef DLOCK_WITH_ETCD
#include "support/etcd_server.h"
#endif

namespace dlock::testing {

// A dlockd's own network: a namespace (fresh, or `inside` one given, e.g. an etcd member's), a
// cable from the test's namespace for its clients, and a cable back to the test's namespace for a
// backend that listens on the test's loopback (PostgreSQL, a loopback etcd), through relays.
class DlockdNetwork {
 public:
  explicit DlockdNetwork(const NetNamespace* inside = nullptr);
  DlockdNetwork(const DlockdNetwork&) = delete;
  DlockdNetwork& operator=(const DlockdNetwork&) = delete;
  ~DlockdNetwork();

  const NetNamespace& ns() const { return inside_ != nullptr ? *inside_ : *own_; }

  // Puts `options` on this network: dlockd runs in the namespace and listens on its end of the
  // client cable; every "127.0.0.1:PORT" in its pg_url and etcd_endpoints is replaced by a relay
  // to that port on the backend cable.
  void place(DlockdOptions& options);

  // Cuts (or mends) a cable as a cable is cut: one end goes down and what the other side sends
  // vanishes silently; each side notices only through its own timeouts. Clients: dlockd's end
  // (the test's requests vanish). Backend: the test's end (dlockd's requests vanish).
  void cut_clients(bool cut) const;
  void cut_backend(bool cut) const;

 private:
  std::string relayed(const std::string& text);

  std::unique_ptr<NetNamespace> own_;
  const NetNamespace* inside_;
  Subnet client_net_;
  Veth client_link_;
  Subnet backend_net_;
  std::unique_ptr<Veth> backend_link_;
  std::vector<std::unique_ptr<TcpRelay>> relays_;
};

#ifdef DLOCK_WITH_ETCD
// Three etcd members, each in its own namespace, joined by a bridge in a "switch" namespace
// (layer 2 only: nothing is routed). The test's own namespace is on the bridge too. Cutting a
// member off = taking its bridge port down; the test's namespace (and a dlockd running there) can
// be cut off from every member the same way.
class PartitionedEtcd {
 public:
  PartitionedEtcd();
  PartitionedEtcd(const PartitionedEtcd&) = delete;
  PartitionedEtcd& operator=(const PartitionedEtcd&) = delete;

  // The members (kill, start, leader: as any EtcdCluster).
  EtcdCluster& cluster() { return *cluster_; }
  std::string endpoint(int member) const { return cluster_->endpoint(member); }
  const NetNamespace& member_namespace(int member) const { return *namespaces_.at(member); }

  void isolate(int member, bool isolated) const { ports_.at(member)->set_b_up(!isolated); }
  void isolate_test_namespace(bool isolated) const { root_port_->set_b_up(!isolated); }

  // Every member agrees on one leader and a linearizable read succeeds.
  void wait_healthy(std::chrono::milliseconds timeout);

 private:
  NetNamespace switch_ns_{"switch"};
  Subnet lan_ = Subnet::next();
  std::unique_ptr<Veth> root_port_;
  std::vector<std::unique_ptr<NetNamespace>> namespaces_;
  std::vector<std::unique_ptr<Veth>> ports_;
  std::unique_ptr<EtcdCluster> cluster_;
};
#endif

}  // namespace dlock::testing
