#include "support/partitions.h"

#include <regex>
#include <stdexcept>

namespace dlock::testing {

DlockdNetwork::DlockdNetwork(const NetNamespace* inside)
    : own_(inside == nullptr ? std::make_unique<NetNamespace>("dlockd") : nullptr),
      inside_(inside),
      client_net_(Subnet::next()),
      client_link_(nullptr, client_net_.cidr(1), &ns(), client_net_.cidr(2)) {}

DlockdNetwork::~DlockdNetwork() = default;

std::string DlockdNetwork::relayed(const std::string& text) {
  static const std::regex loopback(R"(127\.0\.0\.1:(\d+))");
  std::string result;
  auto rest = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), loopback), end; it != end; ++it) {
    if (!backend_link_) {
      backend_net_ = Subnet::next();
      backend_link_ =
          std::make_unique<Veth>(nullptr, backend_net_.cidr(1), &ns(), backend_net_.cidr(2));
    }
    relays_.push_back(
        std::make_unique<TcpRelay>(backend_net_.host(1), "127.0.0.1", std::stoi((*it)[1].str())));
    result.append(rest, (*it)[0].first).append(relays_.back()->address());
    rest = (*it)[0].second;
  }
  return result.append(rest, text.cend());
}

void DlockdNetwork::place(DlockdOptions& options) {
  options.pg_url = relayed(options.pg_url);
  options.etcd_endpoints = relayed(options.etcd_endpoints);
  options.listen_host = client_net_.host(2);
  options.wrapper = ns().wrap({});
}

void DlockdNetwork::cut_clients(bool cut) const { client_link_.set_b_up(!cut); }

void DlockdNetwork::cut_backend(bool cut) const {
  if (!backend_link_) throw std::logic_error("this dlockd has no backend cable to cut");
  backend_link_->set_a_up(!cut);
}

#ifdef DLOCK_WITH_ETCD
PartitionedEtcd::PartitionedEtcd() {
  switch_ns_.ip({"link", "add", "br0", "type", "bridge"});
  switch_ns_.ip({"link", "set", "br0", "up"});
  root_port_ = std::make_unique<Veth>(nullptr, lan_.cidr(1), &switch_ns_, "");
  switch_ns_.ip({"link", "set", root_port_->b(), "master", "br0"});
  std::vector<EtcdPlacement> placements;
  for (int i = 0; i < 3; ++i) {
    namespaces_.push_back(std::make_unique<NetNamespace>("etcd" + std::to_string(i)));
    ports_.push_back(
        std::make_unique<Veth>(namespaces_[i].get(), lan_.cidr(2 + i), &switch_ns_, ""));
    switch_ns_.ip({"link", "set", ports_[i]->b(), "master", "br0"});
    placements.push_back({lan_.host(2 + i), namespaces_[i]->wrap({})});
  }
  cluster_ = std::make_unique<EtcdCluster>(3, false, std::vector<std::string>{}, placements);
  wait_healthy(std::chrono::seconds(60));
}

void PartitionedEtcd::wait_healthy(std::chrono::milliseconds timeout) {
  const bool healthy = wait_for(
      [&] {
        try {
          return cluster_->leader().has_value() && cluster_->raw().current_revision() > 0;
        } catch (const std::runtime_error&) {
          return false;
        }
      },
      timeout, std::chrono::milliseconds(50));
  if (!healthy) throw std::runtime_error("the partitioned etcd cluster is not healthy");
}
#endif

}  // namespace dlock::testing
