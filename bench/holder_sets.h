#pragma once

// The holder-set row (bench/README.md, ADR-0020): what a shared grant and a permit cost through
// dlockd against an exclusive grant, in the same run on the same dlockd.

#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "bench.h"
#include "http_load.h"

namespace dlock::bench {

// At each client count, one after another so that drift hits them alike: shared pairs on
// distinct keys, shared holders of one key, permits of one semaphore of limit = clients
// (http_holders); with `standalone` (bench/run --holders-only) also the exclusive pairs
// (http_pairs) first and the exclusive hot key (http_hot with wait_ms) last, which a full run
// measures in its own rows.
void holder_sets(const HttpTarget& target, const std::string& backend, int clients,
                 std::chrono::milliseconds duration, bool standalone,
                 const std::function<void(Measurement)>& record);

// report.md's "Holder sets" table: every shape with its ratios to the exclusive pairs and, for
// the shared hot key, to the exclusive hot key at the same client count.
void write_holder_sets(std::ostream& md, const std::vector<Measurement>& all,
                       const std::vector<std::string>& backends, const std::vector<int>& clients);

// summary.json's holder-set keys of one backend (null with a note when not measured).
void add_holder_set_keys(boost::json::object& o, std::map<std::string, std::string>& notes,
                         const std::vector<Measurement>& all, const std::string& backend, int cmin,
                         int cmax);

}  // namespace dlock::bench
