#include "report.h"

#include "holder_sets.h"
#include "report_util.h"

#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <ostream>
#include <stdexcept>

namespace dlock::bench {

namespace {

using report_detail::find;
using report_detail::fixed;
using report_detail::number_or_null;
using report_detail::P50;
using report_detail::Rate;
using report_detail::ratio;

// The "TLS cost" rows (tls_cost.h): HTTPS against plain HTTP, same backend, same run.
void write_tls_cost(std::ostream& md, const RunInfo& info, const std::vector<Measurement>& all,
                    const std::vector<std::string>& backends) {
  bool any = false;
  for (const auto& b : backends) {
    for (int c : info.clients) {
      const auto* plain = find(all, b, "tls-plain", "pairs", c);
      const auto* tls = find(all, b, "tls", "pairs", c);
      if (plain == nullptr || tls == nullptr || plain->ops == 0 || tls->ops == 0) continue;
      if (!any) {
        md << "\n## TLS cost\n\n"
           << "Uncontended pairs through a dlockd serving HTTPS (`--tls-cert-file`, TLS 1.3, "
              "keep-alive connections: handshakes happen before the clock starts) against a "
              "dlockd serving plain HTTP on the same backend, measured plain, TLS, TLS, plain "
              "at each client count (pairs/s over both runs, p50 the mean of the two).\n\n"
           << "| backend | clients | plain pairs/s | TLS pairs/s | TLS ÷ plain pairs/s | plain "
              "p50 ms | TLS p50 ms | TLS ÷ plain p50 | errors |\n"
           << "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
        any = true;
      }
      md << "| " << b << " | " << c << " | " << fixed(plain->per_second(), 0) << " | "
         << fixed(tls->per_second(), 0) << " | " << fixed(tls->per_second() / plain->per_second())
         << " | " << fixed(plain->p50_ms, 3) << " | " << fixed(tls->p50_ms, 3) << " | "
         << (plain->p50_ms > 0 ? fixed(tls->p50_ms / plain->p50_ms) : "–") << " | "
         << plain->errors + tls->errors << " |\n";
    }
  }
}

// The sessions-scale row (sessions_scale.h) as a report.md table; a row that did not open every
// session it was asked for says so under the table (its `lost` counts opened sessions only).
void write_sessions_scale(std::ostream& md, const std::map<std::string, BackendExtras>& extras,
                          const std::vector<std::string>& backends) {
  bool any = false;
  std::string shortfalls;
  for (const auto& b : backends) {
    const auto it = extras.find(b);
    if (it == extras.end() || !it->second.sessions_scale) continue;
    const SessionsScaleFigures& f = *it->second.sessions_scale;
    if (!any) {
      md << "\n## Sessions at scale\n\n"
         << "N sessions opened through one dlockd (concurrently, over 32 connections, for at "
            "most the open bound) and kept "
            "alive by the bench as their clients would, over N / 1000 (32 to 256) more "
            "connections (each renewed one keepalive interval after its last renewal was sent), "
            "while uncontended pairs run for the window. The fill row's sessions and locks are "
            "closed first. Opened = sessions opened of those asked for (✗: the row did not "
            "reach its target). "
            "Lost = a keepalive answered 404 (the session had expired). CPU over the window "
            "(utime+stime from /proc; backend = the PostgreSQL or etcd server's processes), "
            "RSS at its end.\n\n"
         << "| backend | opened of sessions | not opened | TTL s | keepalive every s | open s | "
            "lost | keepalives/s | "
            "keepalive p50 ms | p99 ms | most behind ms | keepalive errors | reconnects | "
            "pairs/s (clients) | "
            "dlockd CPU % | backend CPU % | dlockd RSS MiB |\n"
         << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
            "---: | ---: | ---: | ---: | ---: |\n";
      any = true;
    }
    const auto opt = [](std::optional<double> v, int digits) {
      return v ? fixed(*v, digits) : std::string("–");
    };
    const bool short_of_target = f.opened < f.sessions;
    md << "| " << b << " | " << f.opened << " of " << f.sessions << (short_of_target ? " ✗" : "")
       << " | " << f.sessions - f.opened << " | " << fixed(f.ttl_s, 0) << " | "
       << fixed(f.keepalive_every_s, 0) << " | " << fixed(f.open_seconds, 1)
       << (f.open_limit_hit ? " (bound)" : "") << " | " << f.lost << " | "
       << opt(f.keepalives_per_s, 0) << " | " << opt(f.keepalive_p50_ms, 3) << " | "
       << opt(f.keepalive_p99_ms, 3) << " | " << fixed(f.max_behind_ms, 0) << " | "
       << f.keepalive_errors << " | " << f.reconnects << " | " << opt(f.pairs_per_s, 0) << " ("
       << f.pairs_clients << ") | " << opt(f.dlockd_cpu_percent, 0) << " | "
       << opt(f.backend_cpu_percent, 0) << " | " << opt(f.rss_mib, 1) << " |\n";
    if (f.open_limit_hit) {
      shortfalls += "- **" + b + "**: open phase stopped after " + fixed(f.open_seconds, 0) +
                    " s (bound " + fixed(f.open_limit_s, 0) + " s) with " +
                    std::to_string(f.opened_at_window) + " of " + std::to_string(f.sessions) +
                    " sessions open (" + std::to_string(f.opened) +
                    " once the opens in flight had answered); the window ran with those, and "
                    "`lost` counts only sessions that were opened.\n";
    } else if (short_of_target) {
      shortfalls += "- **" + b + "**: " + std::to_string(f.sessions - f.opened) + " of " +
                    std::to_string(f.sessions) + " sessions were never opened (" +
                    std::to_string(f.open_errors) + " open errors).\n";
    }
    if (f.row_stopped) {
      shortfalls += "- **" + b +
                    "**: the row did not end within its bound (open bound + "
                    "window + a margin); its dlockd was killed and the row shows what the bench "
                    "had by then.\n";
    }
    if (f.fill_sessions > 0 && f.fill_closed < f.fill_sessions) {
      shortfalls += "- **" + b + "**: only " + std::to_string(f.fill_closed) + " of the fill " +
                    "row's " + std::to_string(f.fill_sessions) +
                    " sessions were closed before the row; the rest stayed in the backend.\n";
    }
  }
  if (!shortfalls.empty()) md << "\n" << shortfalls;
}

// Election failover (elections.h): latencies from the leader's session expiry, not ratios.
void write_election_failover(std::ostream& md, const std::vector<Measurement>& all,
                             const std::map<std::string, BackendExtras>& extras,
                             const std::vector<std::string>& backends) {
  md << "\n## Election failover\n\n"
     << "A leader campaigns on a session of the smallest TTL and never renews it; a second "
        "session campaigns with `wait_ms` and an observer polls `GET /v1/elections/{name}` with "
        "the leader's `after_token` and `after_value`. Each is timed from the leader's expiry as "
        "its client counts it (its session request's send time + the answered `ttl_ms`, "
        "ADR-0011) to its 200 being received; one sample per round, rounds 0–499 ms apart. What "
        "bounds it: on "
        "sqlite and pg, dlockd's wake-up of the waiters at the holder's expiry (+5 ms) and one "
        "takeover write (no reaper is needed: an expired holder is taken over); on etcd, the "
        "session lease's expiry in etcd, whose lessor revokes expired leases every 500 ms, "
        "then the watch that tells dlockd.\n\n"
     << "| backend | TTL ms | rounds | next grant p50 ms | p99 ms | observer p50 ms | p99 ms | "
        "errors |\n"
     << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& b : backends) {
    const auto* grant = find(all, b, "http", "failover-grant", 1);
    const auto* observe = find(all, b, "http", "failover-observe", 1);
    const auto it = extras.find(b);
    if (grant == nullptr || observe == nullptr || grant->ops == 0) {
      std::string why = "not measured";
      if (it != extras.end() && it->second.notes.count("failover_grant_p50_ms")) {
        why = it->second.notes.at("failover_grant_p50_ms");
      }
      md << "| " << b << " | – | – | – | – | – | – | " << why << " |\n";
      continue;
    }
    const auto ttl = it == extras.end() ? std::nullopt : it->second.election_ttl_ms;
    md << "| " << b << " | " << (ttl ? fixed(*ttl, 0) : "–") << " | " << grant->ops << " | "
       << fixed(grant->p50_ms, 1) << " | " << fixed(grant->p99_ms, 1) << " | "
       << fixed(observe->p50_ms, 1) << " | " << fixed(observe->p99_ms, 1) << " | " << grant->errors
       << " |\n";
  }
}

// Why the hot key's grants/s fall short of the serial limit (bench/README.md, "The HTTP floor"):
// each grant is one write (a hand-over) plus one HTTP round trip (the grant out, the
// next release in), so even a server that added nothing to its HTTP floor would grant at most
// once per raw acquire + floor round trip.
void add_hot_key_floor_keys(boost::json::object& o, std::map<std::string, std::string>& notes,
                            const std::vector<Measurement>& all, const std::string& backend,
                            const Rate& rate, std::optional<double> raw_acquire_p50, int cmin,
                            int cmax) {
  const auto p50_of = [&](const char* workload) -> std::optional<double> {
    const auto* m = find(all, backend, "http", workload, cmin);
    if (m == nullptr || m->ops == 0) return std::nullopt;
    return m->p50_ms;
  };
  const auto floor = p50_of("floor");
  o["http_floor_p50_ms_c1"] = number_or_null(floor);
  o["http_read_p50_ms_c1"] = number_or_null(p50_of("read"));
  const auto hot = rate("http", "hot", cmax);
  const auto serial = rate("raw", "pairs", cmin);
  std::optional<double> interval, ceiling, above;
  if (hot) interval = 1000.0 / *hot;
  if (serial && raw_acquire_p50 && floor) {
    ceiling = (1000.0 / *serial) / (*raw_acquire_p50 + *floor);
  }
  if (interval && raw_acquire_p50 && floor) above = *interval - *raw_acquire_p50 - *floor;
  o["hot_key_grant_interval_ms"] = number_or_null(interval);
  o["hot_key_ceiling_over_serial_limit"] = number_or_null(ceiling);
  o["hot_key_above_floor_ms"] = number_or_null(above);
  notes["hot_key_ceiling_over_serial_limit"] =
      "a hot-key grant is one write plus one HTTP round trip: serial-limit interval (1 / raw "
      "pairs/s at the smallest client count) / (raw_acquire_p50_ms_c1 + http_floor_p50_ms_c1), "
      "the ratio a server adding nothing above its HTTP floor (GET /healthz, no worker, no "
      "store) could reach; hot_key_above_floor_ms = hot_key_grant_interval_ms - raw acquire - "
      "floor is what dlockd adds on top (thread hand-offs, the store call, the holder's 204, the "
      "next acquire that joins the queue)";
}

// Session-bound locks (path http-sb) against raw, the anchor and TTL locks.
void add_session_bound_keys(boost::json::object& o, std::map<std::string, std::string>& notes,
                            const Rate& rate, const P50& p50, const std::string& backend, int cmin,
                            int cmax) {
  const auto sb = rate("http-sb", "pairs", cmax);
  o["http_sb_over_raw_throughput_c64"] = number_or_null(ratio(sb, rate("raw", "pairs", cmax)));
  o["http_sb_over_anchor_throughput_c64"] =
      number_or_null(ratio(sb, rate("anchor", "pairs", cmax)));
  o["http_sb_over_http_throughput_c64"] = number_or_null(ratio(sb, rate("http", "pairs", cmax)));
  o["http_sb_p50_ms_c1"] = number_or_null(p50("http-sb", cmin));
  o["http_sb_over_raw_p50_c1"] = number_or_null(ratio(p50("http-sb", cmin), p50("raw", cmin)));
  o["anchor_p50_ms_c1"] = number_or_null(p50("anchor", cmin));
  o["http_sb_over_anchor_p50_c1"] =
      number_or_null(ratio(p50("http-sb", cmin), p50("anchor", cmin)));
  // The p50 target: 1.2 x the reference + 0.2 ms, the reference being v3lock on etcd
  // and the raw path elsewhere.
  const auto reference = backend == "etcd" ? p50("anchor", cmin) : p50("raw", cmin);
  o["http_sb_p50_target_ms_c1"] =
      number_or_null(reference ? std::optional<double>(*reference * 1.2 + 0.2) : std::nullopt);
  o["hot_key_sb_grants_per_s_c64"] = number_or_null(rate("http-sb", "hot", cmax));
  o["hot_key_sb_over_serial_limit"] =
      number_or_null(ratio(rate("http-sb", "hot", cmax), rate("raw", "pairs", cmin)));
  if (!rate("anchor", "pairs", cmax)) {
    for (const char* key :
         {"http_sb_over_anchor_throughput_c64", "http_sb_over_anchor_p50_c1", "anchor_p50_ms_c1"}) {
      notes.emplace(key, "no anchor path for this backend in this run");
    }
  }
}

// The sessions-scale row's summary keys (null with a note when it did not run).
void add_sessions_scale_keys(boost::json::object& o, std::map<std::string, std::string>& notes,
                             const BackendExtras& x) {
  const auto& f = x.sessions_scale;
  const auto count = [&](std::uint64_t SessionsScaleFigures::*member) -> boost::json::value {
    if (!f) return nullptr;
    return (*f).*member;
  };
  const auto value = [&](std::optional<double> SessionsScaleFigures::*member) {
    return f ? number_or_null((*f).*member) : boost::json::value(nullptr);
  };
  o["sessions_scale_sessions"] = count(&SessionsScaleFigures::sessions);
  o["sessions_scale_opened"] = count(&SessionsScaleFigures::opened);
  o["sessions_scale_not_opened"] = f ? boost::json::value(f->sessions - f->opened) : nullptr;
  o["sessions_scale_opened_at_window"] = count(&SessionsScaleFigures::opened_at_window);
  o["sessions_scale_open_limit_s"] = f ? number_or_null(f->open_limit_s) : nullptr;
  o["sessions_scale_open_limit_hit"] = f ? boost::json::value(f->open_limit_hit) : nullptr;
  o["sessions_scale_row_stopped"] = f ? boost::json::value(f->row_stopped) : nullptr;
  o["sessions_scale_fill_sessions_closed"] = count(&SessionsScaleFigures::fill_closed);
  o["sessions_scale_lost"] = count(&SessionsScaleFigures::lost);
  o["sessions_scale_keepalive_errors"] = count(&SessionsScaleFigures::keepalive_errors);
  o["sessions_scale_reconnects"] = count(&SessionsScaleFigures::reconnects);
  o["sessions_scale_open_seconds"] = f ? number_or_null(f->open_seconds) : nullptr;
  o["sessions_scale_max_behind_ms"] = f ? number_or_null(f->max_behind_ms) : nullptr;
  o["sessions_scale_keepalives_per_s"] = value(&SessionsScaleFigures::keepalives_per_s);
  o["sessions_scale_keepalive_p50_ms"] = value(&SessionsScaleFigures::keepalive_p50_ms);
  o["sessions_scale_keepalive_p99_ms"] = value(&SessionsScaleFigures::keepalive_p99_ms);
  o["sessions_scale_dlockd_cpu_percent"] = value(&SessionsScaleFigures::dlockd_cpu_percent);
  o["sessions_scale_backend_cpu_percent"] = value(&SessionsScaleFigures::backend_cpu_percent);
  o["sessions_scale_rss_mib"] = value(&SessionsScaleFigures::rss_mib);
  o["sessions_scale_pairs_per_s"] = value(&SessionsScaleFigures::pairs_per_s);
  if (!f) {
    for (const char* key : {"sessions_scale_lost", "sessions_scale_keepalive_p99_ms"}) {
      notes.emplace(key, "the sessions-scale row did not run (--scale-sessions 0 or failed)");
    }
  }
}

}  // namespace

void write_report(const std::string& dir, const RunInfo& info, const std::vector<Measurement>& all,
                  const std::map<std::string, BackendExtras>& extras,
                  const std::vector<std::string>& backends) {
  const int cmax = info.clients.empty() ? 1 : info.clients.back();
  const int cmin = info.clients.empty() ? 1 : info.clients.front();
  std::ofstream md(dir + "/report.md");
  if (!md) throw std::runtime_error("cannot write " + dir + "/report.md");
  md << "# dlock-bench " << info.mode << " run, " << info.started_at << "\n\n"
     << "Command: `" << info.command << "`  \n"
     << "Each point ran " << info.duration_ms << " ms. Ratios are against path 1 (raw backend "
     << "operation) measured in this run at the same client count; for the hot key, against "
     << "the raw single-client acquire+release rate (the serial limit). `raw-again` is path 1 "
     << "measured once more at the end of the backend's runs: its ratio to `raw` shows how much "
     << "the machine drifted during the run.\n\n"
     << "## Uncontended acquire+release pairs (distinct keys)\n\n"
     << "`http-sb` is `http` with session-bound locks (`\"lease\":\"session\"`, no `ttl_ms`; "
        "ADR-0018). × anchor: against the anchor recipe (pg advisory lock, etcd v3lock) at the "
        "same client count.\n\n"
     << "| backend | path | clients | pairs/s | p50 ms | p99 ms | acquire p50 ms | × raw pairs/s | "
        "× raw p50 | × anchor pairs/s | × anchor p50 | errors |\n"
     << "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  std::ofstream dat(dir + "/pairs.dat");
  for (const auto& b : backends) {
    for (const char* path : {"raw", "anchor", "spi", "http", "http-sb", "raw-again"}) {
      for (int c : info.clients) {
        const auto* m = find(all, b, path, "pairs", c);
        if (m == nullptr) continue;
        const auto* raw = find(all, b, "raw", "pairs", c);
        const auto* anchor = find(all, b, "anchor", "pairs", c);
        md << "| " << b << " | " << path << " | " << c << " | " << fixed(m->per_second(), 0)
           << " | " << fixed(m->p50_ms, 3) << " | " << fixed(m->p99_ms, 3) << " | "
           << fixed(m->acquire_p50_ms, 3) << " | "
           << (raw ? fixed(m->per_second() / raw->per_second()) : "–") << " | "
           << (raw && raw->p50_ms > 0 ? fixed(m->p50_ms / raw->p50_ms) : "–") << " | "
           << (anchor && anchor->ops ? fixed(m->per_second() / anchor->per_second()) : "–") << " | "
           << (anchor && anchor->p50_ms > 0 ? fixed(m->p50_ms / anchor->p50_ms) : "–") << " | "
           << m->errors << " |\n";
        dat << b << "-" << path << " " << c << " " << m->per_second() << " " << m->p50_ms << " "
            << m->p99_ms << "\n";
      }
    }
  }
  md << "\n## Hot key (all clients on one key)\n\n"
     << "raw = every client retries the acquire statement in a loop (no queue); anchor = every "
        "client blocks in pg_advisory_lock / etcd v3lock Lock on one name; spi = the store SPI "
        "in-process, every client retrying try_grant in a loop (the SPI has no queue); http = "
        "dlockd with "
        "`wait_ms` (its FIFO queue); http-sb = the same with session-bound locks; http2 = http "
        "with the clients spread over two dlockd sharing the backend. Latency is the wait for a "
        "grant.\n\n"
     << "| backend | path | clients | grants/s | × serial limit | attempts/grant | grant wait "
        "p50 ms | p99 ms | errors |\n"
     << "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& b : backends) {
    const auto* serial = find(all, b, "raw", "pairs", cmin);
    for (const char* path : {"raw", "anchor", "spi", "http", "http-sb", "http2"}) {
      for (int c : info.clients) {
        const auto* m = find(all, b, path, "hot", c);
        if (m == nullptr) continue;
        md << "| " << b << " | " << path << " | " << c << " | " << fixed(m->per_second(), 0)
           << " | " << (serial ? fixed(m->per_second() / serial->per_second()) : "–") << " | "
           << (m->ops ? fixed(static_cast<double>(m->attempts) / static_cast<double>(m->ops)) : "–")
           << " | " << fixed(m->p50_ms, 3) << " | " << fixed(m->p99_ms, 3) << " | " << m->errors
           << " |\n";
      }
    }
  }

  write_holder_sets(md, all, backends, info.clients);
  write_tls_cost(md, info, all, backends);
  write_sessions_scale(md, extras, backends);
  write_election_failover(md, all, extras, backends);

  boost::json::object summary;
  md << "\n## Per backend\n\n";
  for (const auto& b : backends) {
    const auto it = extras.find(b);
    const BackendExtras empty;
    const BackendExtras& x = it == extras.end() ? empty : it->second;
    auto rate = [&](const char* path, const char* workload, int c) -> std::optional<double> {
      const auto* m = find(all, b, path, workload, c);
      if (m == nullptr || m->ops == 0) return std::nullopt;
      return m->per_second();
    };
    auto p50 = [&](const char* path, int c) -> std::optional<double> {
      const auto* m = find(all, b, path, "pairs", c);
      if (m == nullptr || m->ops == 0) return std::nullopt;
      return m->p50_ms;
    };
    std::optional<double> handoff_p50, handoff_p99;
    if (!x.handoff_ms.empty()) {
      handoff_p50 = percentile(x.handoff_ms, 0.5);
      handoff_p99 = percentile(x.handoff_ms, 0.99);
    }
    std::optional<double> raw_acquire_p50;
    if (const auto* raw = find(all, b, "raw", "pairs", cmin); raw && raw->ops) {
      raw_acquire_p50 = raw->acquire_p50_ms;
    }
    auto notes = x.notes;
    boost::json::object o;
    o["clients_max"] = cmax;
    o["http_over_raw_throughput_c64"] =
        number_or_null(ratio(rate("http", "pairs", cmax), rate("raw", "pairs", cmax)));
    o["http_over_raw_p50_c1"] = number_or_null(ratio(p50("http", cmin), p50("raw", cmin)));
    o["http_p50_ms_c1"] = number_or_null(p50("http", cmin));
    o["raw_p50_ms_c1"] = number_or_null(p50("raw", cmin));
    o["raw_acquire_p50_ms_c1"] = number_or_null(raw_acquire_p50);
    o["raw_again_over_raw_throughput_c1"] =
        number_or_null(ratio(rate("raw-again", "pairs", cmin), rate("raw", "pairs", cmin)));
    o["spi_over_raw_throughput_c64"] =
        number_or_null(ratio(rate("spi", "pairs", cmax), rate("raw", "pairs", cmax)));
    o["handoff_p50_ms"] = number_or_null(handoff_p50);
    o["handoff_p99_ms"] = number_or_null(handoff_p99);
    o["handoff_samples"] = x.handoff_ms.size();
    o["handoff_hot_p50_ms"] = number_or_null(
        x.handoff_hot_ms.empty() ? std::nullopt
                                 : std::optional<double>(percentile(x.handoff_hot_ms, 0.5)));
    o["handoff_hot_from_release_sent_p50_ms"] =
        number_or_null(x.handoff_hot_sent_ms.empty()
                           ? std::nullopt
                           : std::optional<double>(percentile(x.handoff_hot_sent_ms, 0.5)));
    if (!x.handoff_ms_two_servers.empty()) {
      o["handoff_two_servers_p50_ms"] = number_or_null(percentile(x.handoff_ms_two_servers, 0.5));
      o["handoff_two_servers_p99_ms"] = number_or_null(percentile(x.handoff_ms_two_servers, 0.99));
    } else {
      o["handoff_two_servers_p50_ms"] = nullptr;
      o["handoff_two_servers_p99_ms"] = nullptr;
    }
    o["hot_key_grants_per_s_two_servers"] = number_or_null(rate("http2", "hot", cmax));
    std::optional<double> sent_p50;
    if (!x.handoff_sent_ms.empty()) {
      sent_p50 = percentile(x.handoff_sent_ms, 0.5);
      o["handoff_from_release_sent_p99_ms"] = number_or_null(percentile(x.handoff_sent_ms, 0.99));
    } else {
      o["handoff_from_release_sent_p99_ms"] = nullptr;
    }
    o["handoff_from_release_sent_p50_ms"] = number_or_null(sent_p50);
    o["handoff_from_release_sent_p50_over_raw_acquire_p50"] =
        number_or_null(ratio(sent_p50, raw_acquire_p50));
    o["handoff_p50_over_raw_acquire_p50"] = number_or_null(ratio(handoff_p50, raw_acquire_p50));
    const auto anchor = rate("anchor", "pairs", cmax);
    o["http_over_anchor_throughput_c64"] =
        number_or_null(ratio(rate("http", "pairs", cmax), anchor));
    if (!anchor && !notes.count("http_over_anchor_throughput_c64")) {
      notes["http_over_anchor_throughput_c64"] = "no anchor path for this backend in this run";
    }
    o["hot_key_grants_per_s_c64"] = number_or_null(rate("http", "hot", cmax));
    o["hot_key_over_serial_limit"] =
        number_or_null(ratio(rate("http", "hot", cmax), rate("raw", "pairs", cmin)));
    o["anchor_hot_grants_per_s_c64"] = number_or_null(rate("anchor", "hot", cmax));
    o["hot_key_over_anchor_hot"] =
        number_or_null(ratio(rate("http", "hot", cmax), rate("anchor", "hot", cmax)));
    if (!rate("anchor", "hot", cmax) && !notes.count("hot_key_over_anchor_hot")) {
      notes["hot_key_over_anchor_hot"] = "no anchor path for this backend in this run";
    }
    add_hot_key_floor_keys(o, notes, all, b, rate, raw_acquire_p50, cmin, cmax);
    o["tls_over_plain_throughput_c1"] =
        number_or_null(ratio(rate("tls", "pairs", cmin), rate("tls-plain", "pairs", cmin)));
    o["tls_over_plain_p50_c1"] = number_or_null(ratio(p50("tls", cmin), p50("tls-plain", cmin)));
    o["tls_over_plain_throughput_c64"] =
        number_or_null(ratio(rate("tls", "pairs", cmax), rate("tls-plain", "pairs", cmax)));
    o["tls_over_plain_p50_c64"] = number_or_null(ratio(p50("tls", cmax), p50("tls-plain", cmax)));
    if (!rate("tls", "pairs", cmin)) {
      notes["tls_over_plain_throughput_c1"] = "TLS cost not measured (run with --tls)";
    }
    add_session_bound_keys(o, notes, rate, p50, b, cmin, cmax);
    add_holder_set_keys(o, notes, all, b, cmin, cmax);
    add_sessions_scale_keys(o, notes, x);
    o["keepalives_per_s"] = number_or_null(rate("http", "keepalive", cmax));
    if (const auto* k = find(all, b, "http", "keepalive", cmax); k && k->ops) {
      o["keepalive_p50_ms"] = number_or_null(k->p50_ms);
      o["keepalive_p99_ms"] = number_or_null(k->p99_ms);
    }
    // Election failover (elections.h), from the leader's expiry; null with a note otherwise.
    for (const auto& [workload, key] :
         {std::pair<const char*, std::string>{"failover-grant", "failover_grant"},
          {"failover-observe", "failover_observe"}}) {
      const auto* m = find(all, b, "http", workload, 1);
      const bool measured = m != nullptr && m->ops > 0;
      o[key + "_p50_ms"] = measured ? number_or_null(m->p50_ms) : nullptr;
      o[key + "_p99_ms"] = measured ? number_or_null(m->p99_ms) : nullptr;
    }
    if (!o["failover_grant_p50_ms"].is_null()) {
      o["failover_rounds"] = find(all, b, "http", "failover-grant", 1)->ops;
    } else if (!notes.count("failover_grant_p50_ms")) {
      notes["failover_grant_p50_ms"] = "election failover not measured";
    }
    o["backend_writes_per_grant_hot"] = number_or_null(x.writes_per_grant_hot);
    o["dlockd_attempts_per_grant_hot"] = number_or_null(x.attempts_per_grant_hot);
    o["rss_mib_100k_locks"] =
        number_or_null(x.rss_locks >= 100000 ? x.rss_mib : std::optional<double>{});
    if (x.rss_locks < 100000 && !notes.count("rss_mib_100k_locks")) {
      notes["rss_mib_100k_locks"] = "this mode held " + std::to_string(x.rss_locks) +
                                    " locks, not 100k; see rss_mib_measured (run --full)";
    }
    o["rss_mib_measured"] = number_or_null(x.rss_mib);
    o["rss_locks_held"] = x.rss_locks;
    o["rss_sessions_open"] = x.rss_sessions;
    o["idle_cpu_percent"] = number_or_null(x.idle_cpu_percent);
    o["blocked_waiters"] = x.blocked_waiters;
    o["dlock_waiters_gauge"] = number_or_null(x.waiters_seen);
    o["rss_mib_with_blocked_waiters"] = number_or_null(x.rss_mib_waiters);
    boost::json::object note_object;
    for (const auto& [k, v] : notes) note_object[k] = v;
    o["notes"] = note_object;
    summary[b] = o;

    md << "### " << b << "\n\n| key | value |\n| --- | --- |\n";
    for (const auto& [k, v] : o) {
      if (k == "notes") continue;
      md << "| " << std::string(k) << " | "
         << (v.is_double() ? fixed(v.as_double(), 3) : boost::json::serialize(v)) << " |\n";
    }
    for (const auto& [k, v] : notes) md << "\n- `" << k << "`: " << v;
    md << "\n\n";
  }
  boost::json::object root;
  root["mode"] = info.mode;
  root["started_at"] = info.started_at;
  root["duration_ms_per_point"] = info.duration_ms;
  root["backends"] = summary;
  std::ofstream(dir + "/summary.json") << boost::json::serialize(root) << "\n";
}

}  // namespace dlock::bench
