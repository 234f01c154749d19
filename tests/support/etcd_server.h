#pragma once

// Real etcd for tests: one member (the conformance matrix) or a three-member cluster (failover
// tests), on free loopback ports, data in a fresh temp directory, every member a child process
// the test can kill -9 and start again. Readiness is a real linearizable request answering,
// never a fixed sleep. Everything is torn down (processes and files) on destruction.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/subprocess.h"

namespace dlock::testing {

// What the tests want to see of an etcd key.
struct RawKeyValue {
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;
};

// PEM files of a TLS cluster, made with the openssl CLI when the cluster starts: one CA that
// signed the server's certificate (IP SAN 127.0.0.1) and a client certificate, and an unrelated
// CA that signed nothing this cluster serves (a certificate checked against it must fail).
struct EtcdTlsFiles {
  std::string ca;
  std::string server_cert;
  std::string server_key;
  std::string client_cert;
  std::string client_key;
  std::string other_ca;
};

// Direct access to etcd, bypassing every dlock store: the "raw" reads and writes of the tests.
// One gRPC channel over the given endpoints; every call has a short deadline and throws
// std::runtime_error when etcd does not answer.
class EtcdRawClient {
 public:
  // With `tls`, over https:// endpoints with the client certificate.
  explicit EtcdRawClient(const std::string& endpoints, const EtcdTlsFiles* tls = nullptr);
  EtcdRawClient(const EtcdRawClient&) = delete;
  EtcdRawClient& operator=(const EtcdRawClient&) = delete;
  ~EtcdRawClient();

  // Each returns the revision in the response header.
  std::int64_t put(const std::string& key, const std::string& value);
  std::int64_t remove(const std::string& key);
  std::int64_t current_revision();
  std::optional<RawKeyValue> get(const std::string& key);
  // Maintenance.Status of the member this client reaches: its own ID and the leader it sees
  // (0 = none).
  std::pair<std::uint64_t, std::uint64_t> member_and_leader();

 private:
  struct Stubs;
  std::unique_ptr<Stubs> stubs_;
};

// Where a member runs: an address it listens on and the command prefix that starts it there
// (e.g. "ip netns exec NS", tests/support/partitioned_etcd.h). Default: the test's loopback.
struct EtcdPlacement {
  std::string host = "127.0.0.1";
  std::vector<std::string> wrapper;
};

class EtcdCluster {
 public:
  // Starts `members` members and waits until the cluster has a leader and answers.
  // With `tls`, clients must speak TLS with a certificate the cluster's CA signed
  // (--client-cert-auth); endpoints are https://. `extra_flags` are appended to every member's
  // command line (the bench passes --auto-compaction-* this way). `placements`, when given (one
  // per member, without tls), puts each member elsewhere than the loopback.
  explicit EtcdCluster(int members = 1, bool tls = false, std::vector<std::string> extra_flags = {},
                       std::vector<EtcdPlacement> placements = {});
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;
  ~EtcdCluster();

  int size() const { return static_cast<int>(members_.size()); }
  // "http://127.0.0.1:p1,http://127.0.0.1:p2,..." (etcd.endpoints syntax).
  std::string endpoints() const;
  std::string endpoint(int member) const;

  // SIGKILL: as abrupt as a crash. The member keeps its ports and data for start().
  void kill(int member);
  // Starts a stopped member again and waits until the cluster answers through it.
  void start(int member);
  bool running(int member);
  // The member's process ID (-1 when it is not running), e.g. to read its CPU time.
  pid_t pid(int member) const;

  // The index of the member every live member agrees leads, or std::nullopt.
  std::optional<int> leader();
  // Waits until a live member is leader and a linearizable read through `endpoints` succeeds.
  void wait_ready(std::chrono::milliseconds timeout);

  // A single-member cluster restored from an `etcdctl snapshot save` file: kills the member,
  // `etcdctl snapshot restore`s the file into a fresh data directory that replaces the old
  // one, and starts the member on it (same name and ports). The revision goes back to the
  // snapshot's.
  void restore_snapshot(const std::string& snapshot_path);

  // The certificate files of a TLS cluster (empty paths otherwise).
  const EtcdTlsFiles& tls() const { return tls_; }

  // A raw client over every member (fails over like the store does).
  EtcdRawClient& raw() { return *raw_; }

 private:
  struct Member {
    std::string name;
    EtcdPlacement placement;
    int client_port = 0;
    int peer_port = 0;
    std::string data_dir;
    std::unique_ptr<Subprocess> process;
    std::unique_ptr<EtcdRawClient> client;  // this member only
  };

  void launch(int member);
  std::string peer_url(int member) const;

  std::string root_dir_;
  std::string initial_cluster_;
  std::vector<Member> members_;
  std::unique_ptr<EtcdRawClient> raw_;
  bool use_tls_ = false;
  std::vector<std::string> extra_flags_;
  EtcdTlsFiles tls_;
};

}  // namespace dlock::testing
