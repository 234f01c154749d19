#include "exe/etcd_raise_revision.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "store/etcd/etcd_client.h"

namespace dlock::exe {
namespace {

// Outside every lock key ("/dlock/<namespace>/lock/<key>") and the session prefix.
constexpr const char* kScratchKey = "/dlock/_admin/revision-raise";

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

RaiseReport raise_etcd_revision(const std::string& endpoints,
                                std::chrono::milliseconds call_timeout, std::int64_t target,
                                std::size_t concurrency, std::FILE* progress) {
  store::etcd::EtcdClient client(store::etcd::make_channel(endpoints), call_timeout);
  etcdserverpb::RangeRequest probe;
  probe.set_key(kScratchKey);
  probe.set_count_only(true);
  RaiseReport report;
  report.from_revision = client.range(probe).header().revision();
  std::atomic<std::int64_t> revision{report.from_revision};
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  const auto started = std::chrono::steady_clock::now();

  auto writer = [&] {
    etcdserverpb::PutRequest put;
    put.set_key(kScratchKey);
    try {
      while (!stop.load() && revision.load() < target) {
        const std::int64_t now = client.put(put).header().revision();
        std::int64_t seen = revision.load();
        while (seen < now && !revision.compare_exchange_weak(seen, now)) {
        }
      }
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      stop = true;
    }
  };
  std::vector<std::thread> writers;
  if (revision.load() < target) {
    for (std::size_t i = 0; i < (concurrency == 0 ? 1 : concurrency); ++i) {
      writers.emplace_back(writer);
    }
  }
  auto last_print = started;
  auto last_revision = report.from_revision;
  while (!writers.empty() && !stop.load() && revision.load() < target) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a progress tick, not a wait
    const auto now = std::chrono::steady_clock::now();
    if (progress != nullptr && now - last_print >= std::chrono::seconds(1)) {
      const auto current = revision.load();
      std::fprintf(progress, "dlockd: etcd revision %lld of %lld (%.0f revisions/s)\n",
                   static_cast<long long>(current), static_cast<long long>(target),
                   static_cast<double>(current - last_revision) / seconds(now - last_print));
      std::fflush(progress);
      last_print = now;
      last_revision = current;
    }
  }
  for (auto& thread : writers) thread.join();
  if (error) std::rethrow_exception(error);
  report.to_revision = revision.load();
  report.elapsed = std::chrono::steady_clock::now() - started;
  return report;
}

}  // namespace dlock::exe
