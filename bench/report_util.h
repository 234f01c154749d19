#pragma once

// Helpers shared by the report writers (report.cc, holder_sets.cc): look a measurement up,
// format a number, ratios that stay empty when a side was not measured.

#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench.h"

namespace dlock::bench::report_detail {

inline const Measurement* find(const std::vector<Measurement>& all, const std::string& backend,
                               const std::string& path, const std::string& workload, int clients) {
  for (const auto& m : all) {
    if (m.backend == backend && m.path == path && m.workload == workload && m.clients == clients) {
      return &m;
    }
  }
  return nullptr;
}

inline std::string fixed(double v, int digits = 2) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}

inline boost::json::value number_or_null(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return nullptr;
  return std::round(*v * 1000.0) / 1000.0;
}

inline std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b == 0) return std::nullopt;
  return *a / *b;
}

// A backend's rate (ops/s) and pair p50 for (path, workload, clients); empty when not measured.
using Rate = std::function<std::optional<double>(const char*, const char*, int)>;
using P50 = std::function<std::optional<double>(const char*, int)>;

}  // namespace dlock::bench::report_detail
