"""The Grafana dashboard and the alert rules against a real Prometheus (CTest
prometheus_live_test, docs/deploy.md "Monitoring").

    check_prometheus_live.py DLOCKD WORK

Starts a dlockd on the embedded store and Debian's /usr/bin/prometheus on loopback ports, the
latter loading deploy/prometheus/dlock-rules.yml and scraping the former every second as job
`dlockd`. A short workload (sessions, exclusive, shared, permit and leader grants, a waiter
handed a lock, releases, a refused request) runs, then Prometheus's HTTP API is asked:

- every query of every panel of deploy/grafana/dlock-dashboard.json (and its `instance`
  variable): it must parse and return at least one series;
- every expression of every alert rule: it must parse, and every series selector in it
  (`name{matchers}`) must have series — an alert that is quiet because it names a metric dlockd
  does not export would otherwise pass unseen. The selectors of other exporters' metrics (the
  blackbox exporter's probe_success, etcd's) are not scraped here and are skipped by name;
- every rule as Prometheus evaluates it: health `ok` (a group_left over duplicate series, say,
  fails only at evaluation).

Exit status 1 names each failure. The mutation row prometheus-dashboard-metric-misspelled
(scripts/mutations-deploy.table) misspells a metric of the dashboard; this test must catch it.
Standard library plus PyYAML (the test tools' virtual environment).
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "docs"))
from dlockd_launch import Dlockd, terminate  # noqa: E402

DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "dlock-dashboard.json")
RULES = os.path.join(ROOT, "deploy", "prometheus", "dlock-rules.yml")
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
# Metrics of exporters this test does not run (dlock-rules.yml's header names their jobs).
OTHER_EXPORTERS = re.compile(r"^(probe_success|etcd_\w+)$")
# What Grafana would put in for the dashboard's variables.
VARIABLES = {"$__rate_interval": "20s", "$instance": ".+"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
            "and", "or", "unless", "inf", "nan", "sum", "min", "max", "avg", "group", "stddev",
            "stdvar", "count", "count_values", "bottomk", "topk", "quantile"}
# Selectors whose series appear with their first event, which this workload does not cause: the
# metric itself must still have series.
EVENT_SELECTORS = {'dlock_http_requests_total{code="503"}'}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            status, text = answer.status, answer.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    try:
        return status, json.loads(text) if text else None
    except ValueError:  # Prometheus's /-/ready, a proxy's page
        return status, {"text": text.decode(errors="replace")}


class Prometheus:
    def __init__(self, work, target):
        self.port = free_port()
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w", encoding="utf-8") as out:
            yaml.safe_dump({
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [RULES],
                "scrape_configs": [{"job_name": "dlockd",
                                    "static_configs": [{"targets": [target]}]}],
            }, out)
        self.log = open(os.path.join(work, "prometheus.log"), "wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if http("GET", self.url + "/-/ready")[0] == 200:
                    return
            except (urllib.error.URLError, ConnectionError):
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"prometheus did not start: see {self.log.name}")
            time.sleep(0.1)

    def query(self, expr):
        """(error or None, result list)."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        status, answer = http("GET", url)
        if status != 200 or answer.get("status") != "success":
            return f"{status} {answer.get('errorType')}: {answer.get('error')}", []
        return None, answer["data"]["result"]

    def stop(self):
        terminate(self.process, 10)
        self.log.close()


def workload(base):
    """Sessions, a grant of each mode, a waiter handed a lock, releases, a refused request."""
    sessions = []
    for owner in ("alice", "bob", "carol"):
        status, body = http("POST", base + "/v1/sessions", {"owner": owner, "ttl_ms": 30000})
        assert status == 201, (status, body)
        sessions.append(body["session_id"])
    alice, bob, carol = sessions
    status, held = http("POST", base + "/v1/locks/jobs/acquire", {"session_id": alice})
    assert status == 200, (status, held)
    waited = {}

    def wait_for_it():
        waited["answer"] = http("POST", base + "/v1/locks/jobs/acquire",
                                {"session_id": bob, "wait_ms": 5000})

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    time.sleep(2.5)  # the waiter waits across scrapes (dlock_waiters 1)
    assert http("DELETE", f"{base}/v1/locks/jobs?session_id={alice}"
                f"&fencing_token={held['fencing_token']}")[0] == 204
    waiter.join()
    assert waited["answer"][0] == 200, waited
    for session in (alice, carol):
        assert http("POST", base + "/v1/locks/report/acquire",
                    {"session_id": session, "mode": "shared"})[0] == 200
    assert http("POST", base + "/v1/semaphores/pool/acquire",
                {"session_id": carol, "limit": 2})[0] == 200
    assert http("POST", base + "/v1/elections/primary/campaign",
                {"session_id": carol, "value": "carol:1"})[0] == 200
    status, _ = http("POST", base + "/v1/locks/jobs/acquire", {"session_id": "0" * 32})
    assert status == 404, status
    # Ends alice's shared grant with her session: a release of each kind.
    assert http("DELETE", f"{base}/v1/sessions/{alice}")[0] == 204


def selectors(expr):
    """The series selectors of a PromQL expression: (metric name, `name{matchers}` as written)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: "_" * len(m.group(0)), expr)  # strings out
    found = []
    for match in re.finditer(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?", text):
        name = match.group(1)
        before = text[:match.start()].rstrip()
        if name in KEYWORDS or text[match.end():].lstrip().startswith("("):
            continue  # a keyword, a function, an aggregation
        if re.search(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*$", before):
            continue  # a label name in a grouping
        found.append((name, expr[match.start():match.end()].strip()))
    return found


def substitute(expr):
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def main():
    dlockd, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    started = time.monotonic()
    server = Dlockd(dlockd, os.path.join(work, "dlockd"))
    prometheus = None
    failures = []
    try:
        prometheus = Prometheus(work, server.address)
        workload(server.url)
        # Enough scrapes after the workload for rates over 20 s and every gauge seen.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            error, result = prometheus.query('dlock_held_locks{mode="leader"} > 0')
            if not error and result:
                break
            time.sleep(0.5)
        time.sleep(3)

        dashboard = json.load(open(DASHBOARD, encoding="utf-8"))
        queries = []
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                queries.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
        for variable in dashboard["templating"]["list"]:
            if variable["type"] == "query":
                names = re.fullmatch(r"label_values\((\w+), *\w+\)", variable["definition"])
                queries.append((f"variable {variable['name']}", names.group(1)))
        for where, expr in queries:
            error, result = prometheus.query(substitute(expr))
            if error:
                failures.append(f"{where}: does not parse: {error}\n    {expr}")
            elif not result:
                failures.append(f"{where}: no series\n    {expr}")

        rules = yaml.safe_load(open(RULES, encoding="utf-8"))
        checked = 0
        for group in rules["groups"]:
            for rule in group["rules"]:
                name, expr = rule.get("alert") or rule.get("record"), rule["expr"]
                error, _ = prometheus.query(expr)
                if error:
                    failures.append(f"rule {name}: does not parse: {error}\n    {expr}")
                    continue
                for metric, selector in selectors(expr):
                    if OTHER_EXPORTERS.match(metric) or re.search(r'job="(?!dlockd")', selector):
                        continue  # another exporter's, another job's
                    checked += 1
                    error, result = prometheus.query(
                        metric if selector in EVENT_SELECTORS else selector)
                    if error or not result:
                        failures.append(f"rule {name}: {selector} has no series "
                                        f"({error or 'empty'})")
        status, answer = http("GET", prometheus.url + "/api/v1/rules")
        evaluated = 0
        for group in answer["data"]["groups"]:
            for rule in group["rules"]:
                evaluated += 1
                if rule.get("health") != "ok":
                    failures.append(f"rule {rule['name']}: evaluation {rule.get('health')}: "
                                    f"{rule.get('lastError')}")
        print(f"check_prometheus_live: {len(queries)} dashboard queries, {checked} rule "
              f"selectors, {evaluated} rules evaluated, {time.monotonic() - started:.1f} s")
    finally:
        if prometheus:
            prometheus.stop()
        server.stop()
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
