#include "holder_sets.h"

#include "report_util.h"

namespace dlock::bench {

using report_detail::find;
using report_detail::fixed;
using report_detail::number_or_null;
using report_detail::ratio;

void holder_sets(const HttpTarget& target, const std::string& backend, int clients,
                 std::chrono::milliseconds duration, bool standalone,
                 const std::function<void(Measurement)>& record) {
  if (standalone) record(http_pairs(target, backend, clients, duration));
  for (auto shape : {HolderShape::kSharedPairs, HolderShape::kSharedHot, HolderShape::kPermits}) {
    record(http_holders(target, backend, clients, duration, shape));
  }
  if (standalone) {
    std::vector<double> ignored, ignored_sent;
    record(http_hot({target}, backend, clients, duration, ignored, ignored_sent));
  }
}

void write_holder_sets(std::ostream& md, const std::vector<Measurement>& all,
                       const std::vector<std::string>& backends, const std::vector<int>& clients) {
  md << "\n## Holder sets (ADR-0020)\n\n"
     << "Through dlockd, every grant with a 30 s TTL: `exclusive` = `http` pairs (an exclusive "
        "lock on a key of each client's own); `shared-pairs` = the same with `\"mode\":"
        "\"shared\"`; `shared-hot` = every client acquires and releases a shared hold on ONE "
        "key (readers coexist: none waits); `permits` = every client acquires and releases one "
        "of N permits of one semaphore, N = the client count (all hold one at once); "
        "`exclusive-hot` = the `http` hot key (every client waits its turn with `wait_ms`; its "
        "latency is the wait for a grant, not a pair). "
        "× exclusive: against `exclusive` at the same client count; × excl. hot: grants/s "
        "against `exclusive-hot` at the same client count.\n\n"
     << "| backend | workload | clients | grants/s | p50 ms | p99 ms | × exclusive grants/s | "
        "× exclusive p50 | × excl. hot grants/s | errors |\n"
     << "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  const std::pair<const char*, const char*> rows[] = {{"exclusive", "pairs"},
                                                      {"shared-pairs", "shared-pairs"},
                                                      {"shared-hot", "shared-hot"},
                                                      {"permits", "permits"},
                                                      {"exclusive-hot", "hot"}};
  for (const auto& b : backends) {
    for (const auto& [label, workload] : rows) {
      for (int c : clients) {
        const auto* m = find(all, b, "http", workload, c);
        if (m == nullptr) continue;
        const auto* exclusive = find(all, b, "http", "pairs", c);
        const auto* hot = find(all, b, "http", "hot", c);
        const bool pair_row = std::string(workload) != "hot";  // the hot row: a grant wait
        md << "| " << b << " | " << label << " | " << c << " | " << fixed(m->per_second(), 0)
           << " | " << fixed(m->p50_ms, 3) << " | " << fixed(m->p99_ms, 3) << " | "
           << (exclusive && exclusive->ops ? fixed(m->per_second() / exclusive->per_second()) : "–")
           << " | "
           << (pair_row && exclusive && exclusive->p50_ms > 0 ? fixed(m->p50_ms / exclusive->p50_ms)
                                                              : "–")
           << " | "
           << (pair_row && hot && hot->ops ? fixed(m->per_second() / hot->per_second()) : "–")
           << " | " << m->errors << " |\n";
      }
    }
  }
}

void add_holder_set_keys(boost::json::object& o, std::map<std::string, std::string>& notes,
                         const std::vector<Measurement>& all, const std::string& backend, int cmin,
                         int cmax) {
  const auto rate = [&](const char* workload, int c) -> std::optional<double> {
    const auto* m = find(all, backend, "http", workload, c);
    if (m == nullptr || m->ops == 0) return std::nullopt;
    return m->per_second();
  };
  const auto p50 = [&](const char* workload, int c) -> std::optional<double> {
    const auto* m = find(all, backend, "http", workload, c);
    if (m == nullptr || m->ops == 0) return std::nullopt;
    return m->p50_ms;
  };
  o["shared_over_exclusive_throughput_c1"] =
      number_or_null(ratio(rate("shared-pairs", cmin), rate("pairs", cmin)));
  o["shared_over_exclusive_throughput_c64"] =
      number_or_null(ratio(rate("shared-pairs", cmax), rate("pairs", cmax)));
  o["shared_over_exclusive_p50_c1"] =
      number_or_null(ratio(p50("shared-pairs", cmin), p50("pairs", cmin)));
  o["shared_p50_ms_c1"] = number_or_null(p50("shared-pairs", cmin));
  o["shared_hot_grants_per_s_c64"] = number_or_null(rate("shared-hot", cmax));
  o["shared_hot_over_exclusive_c64"] =
      number_or_null(ratio(rate("shared-hot", cmax), rate("pairs", cmax)));
  o["shared_hot_over_exclusive_hot_c64"] =
      number_or_null(ratio(rate("shared-hot", cmax), rate("hot", cmax)));
  o["permits_grants_per_s_c64"] = number_or_null(rate("permits", cmax));
  o["permits_over_exclusive_throughput_c64"] =
      number_or_null(ratio(rate("permits", cmax), rate("pairs", cmax)));
  if (!rate("shared-pairs", cmin)) {
    notes.emplace("shared_over_exclusive_throughput_c1", "holder-set row not measured");
  }
  if (!rate("hot", cmax)) {
    notes.emplace("shared_hot_over_exclusive_hot_c64", "exclusive hot key not measured");
  }
}

}  // namespace dlock::bench
