#include "support/etcd_server.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "store/etcd/proto/rpc.grpc.pb.h"

namespace dlock::testing {
namespace {

constexpr auto kRawCallTimeout = std::chrono::seconds(3);
constexpr auto kStartTimeout = std::chrono::seconds(60);

// Short raft timings keep elections (and the lease minimum, 1.5 election timeouts) small for
// tests; a cluster gets more slack because two cores are shared with the rest of the build.
constexpr int kSingleHeartbeatMs = 50;
constexpr int kSingleElectionMs = 500;
constexpr int kClusterHeartbeatMs = 100;
constexpr int kClusterElectionMs = 1000;

std::string etcdctl_binary() {
  for (const char* candidate : {"/usr/bin/etcdctl", "/usr/local/bin/etcdctl"}) {
    if (access(candidate, X_OK) == 0) return candidate;
  }
  throw std::runtime_error("etcdctl not found (scripts/setup installs etcd-client)");
}

std::string etcd_binary() {
  for (const char* candidate : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (access(candidate, X_OK) == 0) return candidate;
  }
  throw std::runtime_error("etcd not found (scripts/setup installs etcd-server)");
}

// etcd fsyncs every write; on tmpfs the tests are not limited by the disk.
std::string temp_root() {
  if (access("/dev/shm", W_OK) == 0 && std::getenv("TMPDIR") == nullptr) {
    char pattern[] = "/dev/shm/dlock-etcd-XXXXXX";
    if (mkdtemp(pattern) != nullptr) return pattern;
  }
  return make_temp_dir("dlock-etcd");
}

// "http://127.0.0.1:1,http://127.0.0.1:2" -> "ipv4:127.0.0.1:1,127.0.0.1:2".
std::string target_for(const std::string& endpoints) {
  std::string target = "ipv4:";
  std::size_t start = 0;
  while (start <= endpoints.size()) {
    auto end = endpoints.find(',', start);
    if (end == std::string::npos) end = endpoints.size();
    std::string item = endpoints.substr(start, end - start);
    if (item.starts_with("http://")) item = item.substr(7);
    if (item.starts_with("https://")) item = item.substr(8);
    if (target.size() > 5) target += ",";
    target += item;
    start = end + 1;
  }
  return target;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void run_openssl(const std::string& arguments) {
  const std::string command = "openssl " + arguments + " >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
}

// A CA, a server and a client certificate signed by it, and an unrelated CA, in `dir`.
EtcdTlsFiles make_certificates(const std::string& dir) {
  EtcdTlsFiles files{dir + "/ca.pem",     dir + "/server.pem", dir + "/server.key",
                     dir + "/client.pem", dir + "/client.key", dir + "/other-ca.pem"};
  const auto self_signed = [&](const std::string& name) {
    run_openssl("req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + name + " -keyout " + dir +
                "/" + name + ".key -out " + dir + "/" + name + ".pem");
  };
  const auto signed_by_ca = [&](const std::string& name, const std::string& extensions) {
    std::ofstream(dir + "/" + name + ".ext") << extensions << "\n";
    run_openssl("req -newkey rsa:2048 -nodes -subj /CN=" + name + " -keyout " + dir + "/" + name +
                ".key -out " + dir + "/" + name + ".csr");
    run_openssl("x509 -req -days 2 -in " + dir + "/" + name + ".csr -CA " + files.ca + " -CAkey " +
                dir + "/ca.key -CAcreateserial -out " + dir + "/" + name + ".pem -extfile " + dir +
                "/" + name + ".ext");
  };
  self_signed("ca");
  self_signed("other-ca");
  signed_by_ca("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth");
  signed_by_ca("client", "extendedKeyUsage=clientAuth");
  return files;
}

[[noreturn]] void fail(const char* what, const grpc::Status& status) {
  throw std::runtime_error(std::string("raw etcd ") + what + ": " + status.error_message());
}

}  // namespace

struct EtcdRawClient::Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;

  void deadline(grpc::ClientContext& context) const {
    context.set_deadline(std::chrono::system_clock::now() + kRawCallTimeout);
  }
};

EtcdRawClient::EtcdRawClient(const std::string& endpoints, const EtcdTlsFiles* tls)
    : stubs_(std::make_unique<Stubs>()) {
  // As in the store (src/store/etcd/etcd_client.cc): without frequent backup polling a channel
  // that was refused once may never notice etcd coming up.
  setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "100", 0);
  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName("round_robin");
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (tls != nullptr) {
    args.SetSslTargetNameOverride("127.0.0.1");
    credentials = grpc::SslCredentials(
        {read_file(tls->ca), read_file(tls->client_key), read_file(tls->client_cert)});
  }
  stubs_->channel = grpc::CreateCustomChannel(target_for(endpoints), credentials, args);
  stubs_->kv = etcdserverpb::KV::NewStub(stubs_->channel);
  stubs_->maintenance = etcdserverpb::Maintenance::NewStub(stubs_->channel);
}

EtcdRawClient::~EtcdRawClient() = default;

std::int64_t EtcdRawClient::put(const std::string& key, const std::string& value) {
  grpc::ClientContext context;
  stubs_->deadline(context);
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  etcdserverpb::PutResponse response;
  const auto status = stubs_->kv->Put(&context, request, &response);
  if (!status.ok()) fail("put", status);
  return response.header().revision();
}

std::int64_t EtcdRawClient::remove(const std::string& key) {
  grpc::ClientContext context;
  stubs_->deadline(context);
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(key);
  etcdserverpb::DeleteRangeResponse response;
  const auto status = stubs_->kv->DeleteRange(&context, request, &response);
  if (!status.ok()) fail("delete", status);
  return response.header().revision();
}

std::int64_t EtcdRawClient::current_revision() {
  grpc::ClientContext context;
  stubs_->deadline(context);
  etcdserverpb::RangeRequest request;
  request.set_key("/dlock-test/revision-probe");
  request.set_count_only(true);
  etcdserverpb::RangeResponse response;
  const auto status = stubs_->kv->Range(&context, request, &response);
  if (!status.ok()) fail("range", status);
  return response.header().revision();
}

std::optional<RawKeyValue> EtcdRawClient::get(const std::string& key) {
  grpc::ClientContext context;
  stubs_->deadline(context);
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  etcdserverpb::RangeResponse response;
  const auto status = stubs_->kv->Range(&context, request, &response);
  if (!status.ok()) fail("range", status);
  if (response.kvs_size() == 0) return std::nullopt;
  const auto& kv = response.kvs(0);
  return RawKeyValue{kv.value(), kv.create_revision(), kv.mod_revision(), kv.lease()};
}

std::pair<std::uint64_t, std::uint64_t> EtcdRawClient::member_and_leader() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  etcdserverpb::StatusRequest request;
  etcdserverpb::StatusResponse response;
  const auto status = stubs_->maintenance->Status(&context, request, &response);
  if (!status.ok()) fail("status", status);
  return {response.header().member_id(), response.leader()};
}

EtcdCluster::EtcdCluster(int members, bool tls, std::vector<std::string> extra_flags,
                         std::vector<EtcdPlacement> placements)
    : root_dir_(temp_root()), use_tls_(tls), extra_flags_(std::move(extra_flags)) {
  if (members < 1) throw std::invalid_argument("EtcdCluster needs at least one member");
  if (!placements.empty() && (tls || placements.size() != static_cast<std::size_t>(members))) {
    throw std::invalid_argument("EtcdCluster: one placement per member, without tls");
  }
  if (use_tls_) tls_ = make_certificates(root_dir_);
  members_.resize(members);
  for (int i = 0; i < members; ++i) {
    auto& member = members_[i];
    member.name = "m" + std::to_string(i);
    if (!placements.empty()) member.placement = placements[i];
    member.client_port = free_loopback_port();
    member.peer_port = free_loopback_port();
    member.data_dir = root_dir_ + "/" + member.name;
    if (!initial_cluster_.empty()) initial_cluster_ += ",";
    initial_cluster_ += member.name + "=" + peer_url(i);
  }
  for (int i = 0; i < members; ++i) {
    members_[i].client = std::make_unique<EtcdRawClient>(endpoint(i), use_tls_ ? &tls_ : nullptr);
    launch(i);
  }
  raw_ = std::make_unique<EtcdRawClient>(endpoints(), use_tls_ ? &tls_ : nullptr);
  wait_ready(kStartTimeout);
}

EtcdCluster::~EtcdCluster() {
  for (auto& member : members_) {
    if (member.process) member.process->kill_now();
  }
  std::error_code ignored;
  std::filesystem::remove_all(root_dir_, ignored);
}

std::string EtcdCluster::endpoint(int member) const {
  const auto& at = members_.at(member);
  return (use_tls_ ? "https://" : "http://") + at.placement.host + ":" +
         std::to_string(at.client_port);
}

std::string EtcdCluster::peer_url(int member) const {
  const auto& at = members_.at(member);
  return "http://" + at.placement.host + ":" + std::to_string(at.peer_port);
}

std::string EtcdCluster::endpoints() const {
  std::string all;
  for (int i = 0; i < size(); ++i) all += (i == 0 ? "" : ",") + endpoint(i);
  return all;
}

void EtcdCluster::launch(int index) {
  auto& member = members_.at(index);
  const bool cluster = size() > 1;
  const std::string client_url = endpoint(index);
  const std::string own_peer_url = peer_url(index);
  SubprocessOptions options;
  options.argv = {etcd_binary(),
                  "--name",
                  member.name,
                  "--data-dir",
                  member.data_dir,
                  "--listen-client-urls",
                  client_url,
                  "--advertise-client-urls",
                  client_url,
                  "--listen-peer-urls",
                  own_peer_url,
                  "--initial-advertise-peer-urls",
                  own_peer_url,
                  "--initial-cluster",
                  initial_cluster_,
                  "--initial-cluster-state",
                  "new",
                  "--initial-cluster-token",
                  "dlock-test-" + std::to_string(getpid()),
                  "--heartbeat-interval",
                  std::to_string(cluster ? kClusterHeartbeatMs : kSingleHeartbeatMs),
                  "--election-timeout",
                  std::to_string(cluster ? kClusterElectionMs : kSingleElectionMs),
                  "--logger",
                  "zap"};
  if (use_tls_) {
    options.argv.insert(options.argv.end(),
                        {"--cert-file", tls_.server_cert, "--key-file", tls_.server_key,
                         "--client-cert-auth", "--trusted-ca-file", tls_.ca});
  }
  options.argv.insert(options.argv.end(), extra_flags_.begin(), extra_flags_.end());
  options.argv.insert(options.argv.begin(), member.placement.wrapper.begin(),
                      member.placement.wrapper.end());
  options.log_path = root_dir_ + "/" + member.name + ".log";
  member.process = std::make_unique<Subprocess>(std::move(options));
}

void EtcdCluster::kill(int member) {
  auto& process = members_.at(member).process;
  if (process) process->kill_now();
}

void EtcdCluster::start(int member) {
  if (running(member)) return;
  launch(member);
  wait_ready(kStartTimeout);
}

pid_t EtcdCluster::pid(int member) const {
  const auto& process = members_.at(member).process;
  return process ? process->pid() : -1;
}

bool EtcdCluster::running(int member) {
  auto& process = members_.at(member).process;
  return process && process->running();
}

std::optional<int> EtcdCluster::leader() {
  std::optional<std::uint64_t> agreed;
  std::vector<std::uint64_t> ids(members_.size(), 0);
  for (int i = 0; i < size(); ++i) {
    if (!running(i)) continue;
    try {
      const auto [member_id, leader_id] = members_[i].client->member_and_leader();
      ids[i] = member_id;
      if (leader_id == 0 || (agreed && *agreed != leader_id)) return std::nullopt;
      agreed = leader_id;
    } catch (const std::runtime_error&) {
      return std::nullopt;  // a live member that cannot answer: no stable answer yet
    }
  }
  for (int i = 0; agreed && i < size(); ++i) {
    if (ids[i] == *agreed) return i;
  }
  return std::nullopt;
}

void EtcdCluster::wait_ready(std::chrono::milliseconds timeout) {
  const bool ready = wait_for(
      [&] {
        for (int i = 0; i < size(); ++i) {
          if (members_[i].process && !members_[i].process->running() && i == 0 && size() == 1) {
            throw std::runtime_error("etcd exited; see " + root_dir_ + "/m0.log");
          }
        }
        try {
          raw_->current_revision();  // linearizable: needs a leader
          return leader().has_value();
        } catch (const std::runtime_error&) {
          return false;
        }
      },
      timeout, std::chrono::milliseconds(20));
  if (!ready) throw std::runtime_error("etcd cluster in " + root_dir_ + " did not become ready");
}

}  // namespace dlock::testing

namespace dlock::testing {

void EtcdCluster::restore_snapshot(const std::string& snapshot_path) {
  if (size() != 1) throw std::logic_error("restore_snapshot: single-member clusters only");
  auto& member = members_.at(0);
  kill(0);
  const std::string restored = member.data_dir + ".restored";
  std::error_code ignored;
  std::filesystem::remove_all(restored, ignored);
  SubprocessOptions options;
  options.argv = {etcdctl_binary(),
                  "snapshot",
                  "restore",
                  snapshot_path,
                  "--name",
                  member.name,
                  "--data-dir",
                  restored,
                  "--initial-cluster",
                  initial_cluster_,
                  "--initial-cluster-token",
                  "dlock-test-" + std::to_string(getpid()),
                  "--initial-advertise-peer-urls",
                  peer_url(0)};
  options.env = {"ETCDCTL_API=3"};
  options.log_path = root_dir_ + "/restore.log";
  if (run_command(options, std::chrono::seconds(60)) != 0) {
    throw std::runtime_error("etcdctl snapshot restore failed; see " + root_dir_ + "/restore.log");
  }
  std::filesystem::remove_all(member.data_dir);
  std::filesystem::rename(restored, member.data_dir);
  start(0);
}

}  // namespace dlock::testing
