#pragma once

// The faults of the linearizability workload (issue 43, docs/correctness.md): the nemeses of
// tests/safety, applied one after the other to the dlockd processes and the backend of a run
// while its clients work. Each fault is applied, held, healed, then the system is left alone
// for a moment before the next: every fault ends healed, and the run ends with everything up.
//
// - kill -9 of a dlockd, restarted on the same address and storage (every backend; on sqlite it
//   is the backend's crash too, the store is embedded);
// - a dlockd paused (SIGSTOP) for longer than the workload's short TTLs, then resumed;
// - a dlockd's wall clock stepped (libfaketime, as tests/safety's scenario j): +1 h, -1 h, back;
// - PostgreSQL crashed (SIGQUIT: no checkpoint) and restarted;
// - etcd (three members): its leader killed and restarted; a follower killed and restarted;
// - network partitions (root only, tests/support/partitions.h), each past the 1.5 s TTLs: the
//   clients cut off from dlockd 0 (every backend); dlockd 0 cut off from PostgreSQL; dlockd 1
//   cut off from every etcd member; etcd member 0, with dlockd 0 beside it, cut off from the
//   majority (not killed: it keeps serving what it has).

#include <csignal>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"
#include "support/fault_env.h"
#ifdef DLOCK_WITH_NETNS
#include "support/partitions.h"
#endif

namespace dlock::lin {

using std::chrono::milliseconds;

struct Fault {
  std::string name;
  std::function<void()> apply;
  std::function<void()> heal;
  milliseconds held;
  bool partition = false;
};

// What a run's faults act on. `clock` is null when libfaketime is not installed (no clock
// steps then; the run says so).
struct FaultTargets {
  std::vector<testing::DlockdProcess*> dlockds;
  testing::SteppedClock* clock = nullptr;
  milliseconds partition{2500};  // how long a partition lasts: past the 1.5 s TTLs (2 s in etcd)
#ifdef DLOCK_WITH_PG
  testing::PostgresServer* postgres = nullptr;
#endif
#ifdef DLOCK_WITH_ETCD
  testing::EtcdCluster* etcd = nullptr;
#endif
#ifdef DLOCK_WITH_NETNS
  // Null unless partitions run: dlockd 0's network (its backend cable only on pg), and on etcd
  // the members' network (dlockd 0 beside member 0, dlockd 1 in the test's namespace).
  testing::DlockdNetwork* network = nullptr;
  bool backend_cable = false;
#ifdef DLOCK_WITH_ETCD
  testing::PartitionedEtcd* partitioned_etcd = nullptr;
#endif
#endif
};

// The faults for `targets`, in the order they are applied. `pause` outlasts the longest TTL
// that is meant to run out during a pause. Every dlockd is killed; only the first is paused
// unless `pause_every_dlockd` (the long mode: the pause is the slowest fault).
inline std::vector<Fault> faults_for(const FaultTargets& targets, milliseconds pause,
                                     bool pause_every_dlockd) {
  std::vector<Fault> faults;
  for (std::size_t i = 0; i < targets.dlockds.size(); ++i) {
    auto* dlockd = targets.dlockds[i];
    const std::string which = "dlockd " + std::to_string(i);
    faults.push_back({"kill -9 of " + which + ", restarted", [dlockd] { dlockd->kill9(); },
                      [dlockd] { dlockd->start(); }, milliseconds(500)});
    if (i > 0 && !pause_every_dlockd) continue;
    faults.push_back({which + " paused (SIGSTOP) past the TTL",
                      [dlockd] { dlockd->process().signal(SIGSTOP); },
                      [dlockd] { dlockd->process().signal(SIGCONT); }, pause});
  }
#ifdef DLOCK_WITH_PG
  if (auto* postgres = targets.postgres) {
    faults.push_back({"PostgreSQL crashed (SIGQUIT), restarted", [postgres] { postgres->crash(); },
                      [postgres] { postgres->start(); }, milliseconds(1000)});
  }
#endif
#ifdef DLOCK_WITH_ETCD
  if (auto* etcd = targets.etcd) {
    auto killed = std::make_shared<int>(-1);
    faults.push_back({"etcd leader killed, restarted",
                      [etcd, killed] {
                        *killed = etcd->leader().value_or(0);
                        etcd->kill(*killed);
                      },
                      [etcd, killed] { etcd->start(*killed); }, milliseconds(1500)});
    faults.push_back({"etcd follower (a minority) killed, restarted",
                      [etcd, killed] {
                        *killed = (etcd->leader().value_or(0) + 1) % etcd->size();
                        etcd->kill(*killed);
                      },
                      [etcd, killed] { etcd->start(*killed); }, milliseconds(1500)});
  }
#endif
#ifdef DLOCK_WITH_NETNS
  const milliseconds partition = targets.partition;
  if (auto* network = targets.network) {
    faults.push_back({"clients | dlockd 0 partitioned", [network] { network->cut_clients(true); },
                      [network] { network->cut_clients(false); }, partition, true});
    if (targets.backend_cable) {
      faults.push_back({"dlockd 0 | backend partitioned", [network] { network->cut_backend(true); },
                        [network] { network->cut_backend(false); }, partition, true});
    }
  }
#ifdef DLOCK_WITH_ETCD
  if (auto* etcd = targets.partitioned_etcd) {
    faults.push_back({"dlockd 1 | every etcd member partitioned",
                      [etcd] { etcd->isolate_test_namespace(true); },
                      [etcd] { etcd->isolate_test_namespace(false); }, partition, true});
    faults.push_back({"etcd member 0 and dlockd 0 | the majority partitioned",
                      [etcd] { etcd->isolate(0, true); },
                      [etcd] {
                        etcd->isolate(0, false);
                        etcd->wait_healthy(std::chrono::seconds(60));
                      },
                      partition, true});
  }
#endif
#endif
  // Last: under libfaketime a dlockd whose wall clock runs ahead stalls gRPC's reconnect timers
  // (its etcd channel does not reconnect to a restarted member while it lasts, and for a while
  // after), a fault of the preload, not of a clock step.
  if (auto* clock = targets.clock) {
    faults.push_back({"dlockd wall clock stepped +1 h",
                      [clock] { clock->set_offset(std::chrono::hours(1)); },
                      [clock] { clock->set_offset(std::chrono::seconds(0)); }, milliseconds(1000)});
    faults.push_back({"dlockd wall clock stepped -1 h",
                      [clock] { clock->set_offset(-std::chrono::hours(1)); },
                      [clock] { clock->set_offset(std::chrono::seconds(0)); }, milliseconds(1000)});
  }
  return faults;
}

// Applies `faults` in turn, each held for its time and followed by `quiet`, round after round
// until `until` (at least one full round, whatever the time); returns the names of the faults
// applied, in order.
inline std::vector<std::string> run_nemesis(const std::vector<Fault>& faults, milliseconds quiet,
                                            SteadyClock::time_point until) {
  std::vector<std::string> applied;
  // Real time: the quiet between faults is part of the schedule under test.
  std::this_thread::sleep_for(quiet);
  for (std::size_t i = 0; i < faults.size() || SteadyClock::now() + quiet < until; ++i) {
    const Fault& fault = faults[i % faults.size()];
    fault.apply();
    // Real time: how long the fault lasts is the fault.
    std::this_thread::sleep_for(fault.held);
    fault.heal();
    applied.push_back(fault.name);
    // Real time: the quiet between faults is part of the schedule under test.
    std::this_thread::sleep_for(quiet);
  }
  return applied;
}

}  // namespace dlock::lin
