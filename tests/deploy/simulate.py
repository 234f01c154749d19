#!/usr/bin/python3
"""The Kubernetes simulation (docs/deploy.md, "Kubernetes"): the prod overlay's pods as local
processes, a lock workload through the dlockd "Service", and the disruptions the manifests
allow, with a history check at the end.

    simulate.py RENDERED_PROD.yaml DLOCKD WORKDIR

1. Three etcd members and two dlockd, each with exactly the command line and environment its
   container gets (tests/deploy/k8s_pods.py: pod names mapped to 127.77.x.y). The Secrets'
   placeholders are filled at test time: dlockd-tls with a CA and a server certificate for the
   Service's names made by openssl, dlockd-tokens with one principal.
2. Six clients, each with its own session, acquire / extend / release on three keys through
   the Service: any pod whose readiness probe (the manifest's, at its period) last passed,
   over HTTPS verified against the Secret's ca.crt for the name dlockd.<namespace>.svc (the
   pod's address differs, the certificate names the Service), with a bearer token.
3. kill -9 of the etcd leader and of one dlockd, as far as their PodDisruptionBudgets allow;
   the StatefulSet brings the member back (same name, same volume) after a pause, the
   Deployment a new dlockd pod.
4. A rolling update of dlockd by the Deployment's strategy: a new pod, ready, then the old one
   gets its preStop sleep and SIGTERM and must exit 0 within the grace period.
Checks: no acknowledged grant lost (each one extends with its token and releases: 200, 204),
no session lost, no token reused and grants of a key in token order never overlap, grants
made while the member was down and during the rolling update, at least one ready dlockd at
every sample. Prints what it saw; exits 1 on any failure.
"""
import hashlib
import json
import os
import random
import socket
import ssl
import subprocess
import sys
import threading
import time

import http.client
import yaml

from k8s_pods import Cluster, Pod

TOKEN = "dlk_" + "simulationSimulationSimulation0123456789abc"  # 43 chars after dlk_
KEYS = ["payouts/batch-1", "payouts/batch-2", "ledger"]
WORKERS = 6
events = []  # (time, text)
t0 = time.monotonic()


def say(text):
    events.append((time.monotonic() - t0, text))
    print(f"[{time.monotonic() - t0:6.2f}s] {text}", flush=True)


def make_tls_secret(workdir, namespace):
    """The dlockd-tls Secret's files: a throw-away CA and a server certificate it signed for the
    dlockd Service's DNS names (what docs/deploy.md asks of a real one)."""
    tls_dir = os.path.join(os.path.abspath(workdir), "tls")
    os.makedirs(tls_dir, exist_ok=True)
    names = ["dlockd", f"dlockd.{namespace}", f"dlockd.{namespace}.svc",
             f"dlockd.{namespace}.svc.cluster.local"]
    with open(os.path.join(tls_dir, "server.ext"), "w") as f:
        f.write("subjectAltName=" + ",".join(f"DNS:{n}" for n in names) + "\n"
                "extendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for argv in (["req", "-x509", *ec, "-days", "2", "-subj", "/CN=dlock simulation CA",
                  "-keyout", "ca.key", "-out", "ca.crt"],
                 ["req", *ec, "-subj", "/CN=dlockd", "-keyout", "tls.key", "-out", "tls.csr"],
                 ["x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                  "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-out", "tls.crt"]):
        subprocess.run(["openssl", *argv], cwd=tls_dir, check=True, capture_output=True)
    files = {}
    for name in ("tls.crt", "tls.key", "ca.crt"):
        with open(os.path.join(tls_dir, name)) as f:
            files[name] = f.read()
    return files, names[2]


class PodConnection(http.client.HTTPSConnection):
    """HTTPS to one pod's address, verifying the certificate for the Service's name."""

    def __init__(self, address, port, server_name, context, timeout):
        super().__init__(server_name, port, timeout=timeout, context=context)
        self.address = address

    def connect(self):
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


class Service:
    """The dlockd Service: endpoints are the pods whose readiness probe last passed."""

    def __init__(self, server_name, context):
        self.server_name = server_name  # the name the certificate must hold
        self.context = context  # verifies against the dlockd-tls Secret's ca.crt
        self.pods = []
        self.ready = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.min_ready_after_start = None
        self.samples = 0

    def add(self, pod):
        with self.lock:
            self.pods.append(pod)
        threading.Thread(target=self._prober, args=(pod,), daemon=True).start()

    def remove(self, pod):
        """Deletion: the endpoint goes at once (as preStop starts), the prober stops."""
        with self.lock:
            self.pods.remove(pod)
            self.ready.discard(pod.name)

    def _prober(self, pod):
        period = pod.container["readinessProbe"].get("periodSeconds", 10)
        threshold = pod.container["readinessProbe"].get("failureThreshold", 3)
        failures = 0
        while not self.stop.is_set():
            with self.lock:
                if pod not in self.pods:
                    return
            ok = pod.running() and pod.probe("readinessProbe")
            failures = 0 if ok else failures + 1
            with self.lock:
                if pod in self.pods:
                    if ok:
                        self.ready.add(pod.name)
                    elif failures >= threshold:
                        self.ready.discard(pod.name)
            self.stop.wait(period if ok else min(period, 0.5))

    def pick(self):
        with self.lock:
            ready = [p for p in self.pods if p.name in self.ready]
        return random.choice(ready) if ready else None

    def monitor(self):
        while not self.stop.is_set():
            with self.lock:
                count = len(self.ready)
            if self.min_ready_after_start is not None:
                self.min_ready_after_start = min(self.min_ready_after_start, count)
                self.samples += 1
            time.sleep(0.1)


class Client:
    """One worker: a session, then acquire → extend → release rounds, retrying elsewhere."""

    def __init__(self, index, service, stop, history):
        self.index = index
        self.service = service
        self.stop = stop
        self.history = history
        self.failures = []
        self.retries = 0
        self.unavailable = 0

    def call(self, method, path, body=None, deadline_s=20.0):
        """(status, json, maybe_done_before): retried on refused connections and 503."""
        deadline = time.monotonic() + deadline_s
        maybe_done = False
        while time.monotonic() < deadline:
            pod = self.service.pick()
            if pod is None:
                time.sleep(0.05)
                continue
            sent = False
            try:
                connection = PodConnection(pod.address, 7070, self.service.server_name,
                                           self.service.context, timeout=10)
                headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
                connection.request(method, path, json.dumps(body) if body else None, headers)
                sent = True
                response = connection.getresponse()
                status, text = response.status, response.read()
                connection.close()
            except OSError:
                maybe_done = maybe_done or sent
                self.retries += 1
                time.sleep(0.05)
                continue
            if status == 503:
                maybe_done = True  # an unknown outcome in the backend is answered 503 too
                self.retries += 1
                time.sleep(0.05)
                continue
            return status, (json.loads(text) if text else {}), maybe_done
        return None, None, maybe_done

    def run(self):
        status, session, _ = self.call("POST", "/v1/sessions",
                                       {"owner": f"worker-{self.index}", "ttl_ms": 120000})
        if status != 201:
            self.failures.append(f"worker {self.index}: session not opened ({status})")
            return
        sid = session["session_id"]
        last_keepalive = time.monotonic()
        while not self.stop.is_set():
            if time.monotonic() - last_keepalive > 3:
                status, _, _ = self.call("POST", f"/v1/sessions/{sid}/keepalive")
                if status != 200:
                    self.failures.append(f"worker {self.index}: keepalive {status}: session lost")
                    return
                last_keepalive = time.monotonic()
            key = random.choice(KEYS)
            path = "/v1/locks/" + key.replace("/", "%2F")
            status, grant, _ = self.call("POST", path + "/acquire",
                                         {"session_id": sid, "ttl_ms": 20000, "wait_ms": 2000})
            if status == 409:
                continue
            if status != 200:
                self.unavailable += 1
                if status == 404:
                    self.failures.append(f"worker {self.index}: acquire 404: session lost")
                    return
                continue
            acked = time.monotonic()
            token = grant["fencing_token"]
            status, extended, _ = self.call("POST", path + "/extend",
                                            {"session_id": sid, "fencing_token": token})
            if status != 200 or extended.get("fencing_token") != token:
                # Was it lost? What GET shows, and what a second extend answers.
                _, held, _ = self.call("GET", path)
                again, _, _ = self.call("POST", path + "/extend",
                                        {"session_id": sid, "fencing_token": token})
                still = held.get("fencing_token") == token and again == 200
                self.failures.append(
                    f"worker {self.index}: acknowledged grant {key}#{token}: extend answered "
                    f"{status} {extended.get('error', {}).get('code')}"
                    + ("; yet GET shows it held and a second extend answers 200 (a false "
                       "lock_lost)" if still else f"; GET shows {held}, second extend {again}"))
            time.sleep(random.uniform(0.01, 0.04))
            released_at = time.monotonic()
            status, _, maybe_done = self.call(
                "DELETE", f"{path}?session_id={sid}&fencing_token={token}")
            if status != 204 and not (status == 409 and maybe_done):
                self.failures.append(f"worker {self.index}: acknowledged grant {key}#{token} "
                                     f"lost: release answered {status}")
            self.history.append((key, token, self.index, acked, released_at))
        self.call("DELETE", f"/v1/sessions/{sid}")


def check_history(history):
    """No token reused; per key, in token order, a grant starts after the previous release."""
    problems = []
    for key in KEYS:
        grants = sorted((g for g in history if g[0] == key), key=lambda g: g[1])
        tokens = [g[1] for g in grants]
        if len(set(tokens)) != len(tokens):
            problems.append(f"{key}: a token was granted twice")
        for before, after in zip(grants, grants[1:]):
            if after[3] < before[4]:
                problems.append(f"{key}: #{after[1]} acknowledged before #{before[1]} was released")
    return problems


def check_the_checker():
    """check_history must flag a reused token and overlapping grants, and pass a clean run."""
    key = KEYS[0]
    clean = [(key, 5, 0, 1.0, 1.5), (key, 9, 1, 1.6, 2.0)]
    reused = [(key, 5, 0, 1.0, 1.5), (key, 5, 1, 1.6, 2.0)]
    overlap = [(key, 5, 0, 1.0, 1.7), (key, 9, 1, 1.6, 2.0)]
    out_of_order = [(key, 9, 0, 1.0, 1.5), (key, 5, 1, 1.6, 2.0)]
    assert not check_history(clean), "checker flags a clean history"
    for history in (reused, overlap, out_of_order):
        assert check_history(history), f"checker misses {history}"


def check_exposure(pod, service):
    """What a pod answers to a plain HTTP request, to /v1 over HTTPS without a token, and to
    /metrics without a token (C6: only /healthz, /readyz, /metrics are open)."""
    seen = {}
    try:
        connection = http.client.HTTPConnection(pod.address, 7070, timeout=5)
        connection.request("GET", "/healthz")
        seen["plain"] = connection.getresponse().status
    except (OSError, http.client.HTTPException) as error:
        seen["plain"] = f"refused ({type(error).__name__})"
    for what, path in (("no_token", "/v1/locks/ledger"), ("metrics", "/metrics")):
        connection = PodConnection(pod.address, 7070, service.server_name, service.context, 5)
        connection.request("GET", path)
        seen[what] = connection.getresponse().status
        connection.close()
    return seen


def etcd_leader(pods):
    """The pod of the current etcd leader (maintenance status over etcd's JSON gateway)."""
    for pod in pods:
        try:
            connection = http.client.HTTPConnection(pod.address, 2379, timeout=2)
            connection.request("POST", "/v3/maintenance/status", "{}")
            status = json.loads(connection.getresponse().read())
            connection.close()
            if status.get("leader") and status["leader"] == status["header"]["member_id"]:
                return pod
        except (OSError, ValueError, KeyError):
            continue
    return None


def main():
    check_the_checker()
    rendered, dlockd, workdir = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    with open(rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    token_line = f"simulation {hashlib.sha256(TOKEN.encode()).hexdigest()} lock:*\n"
    namespace = next(d for d in docs if d["kind"] == "Deployment")["metadata"]["namespace"]
    tls_files, server_name = make_tls_secret(workdir, namespace)
    cluster = Cluster(docs, {"etcd": "etcd", "/usr/sbin/dlockd": dlockd},
                      {"dlockd-tokens": {"tokens": token_line}, "dlockd-tls": tls_files})
    etcd_set = cluster.find("StatefulSet", "dlock-etcd")
    deployment = cluster.find("Deployment", "dlockd")
    etcd_pdb = cluster.find("PodDisruptionBudget", "dlock-etcd")["spec"]
    dlockd_pdb = cluster.find("PodDisruptionBudget", "dlockd")["spec"]
    grace = deployment["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)

    etcd_pods = []
    for i in range(etcd_set["spec"]["replicas"]):
        name = f"dlock-etcd-{i}"
        cluster.register(name, f"127.77.1.{i + 1}", "dlock-etcd")
        etcd_pods.append(Pod(cluster, etcd_set, name, f"127.77.1.{i + 1}", workdir))
    for pod in etcd_pods:
        argv, _ = pod.start()
    say(f"etcd pods started, e.g. {' '.join(argv)}")
    for pod in etcd_pods:
        pod.wait_ready(30)
    say(f"{len(etcd_pods)} etcd members ready (readinessProbe {etcd_pods[0].container['readinessProbe']['httpGet']['path']})")

    context = ssl.create_default_context(cadata=tls_files["ca.crt"])
    service = Service(server_name, context)
    next_pod = [0]

    def new_dlockd():
        next_pod[0] += 1
        pod = Pod(cluster, deployment, f"dlockd-{next_pod[0]}", f"127.77.2.{next_pod[0]}", workdir)
        argv, env = pod.start()
        if next_pod[0] == 1:
            dlock_env = " ".join(f"{k}={v}" for k, v in sorted(env.items()) if k.startswith("DLOCK"))
            say(f"dlockd pod: {dlock_env} {' '.join(argv)}")
        pod.wait_ready(30)
        service.add(pod)
        return pod

    dlockd_pods = [new_dlockd() for _ in range(deployment["spec"]["replicas"])]
    while len(service.ready) < len(dlockd_pods):
        time.sleep(0.05)
    say(f"{len(dlockd_pods)} dlockd ready")
    exposure = check_exposure(dlockd_pods[0], service)
    say(f"{dlockd_pods[0].name}: plain HTTP {exposure['plain']}, HTTPS /v1 without a token "
        f"{exposure['no_token']}, /metrics without a token {exposure['metrics']}")
    service.min_ready_after_start = len(service.ready)
    threading.Thread(target=service.monitor, daemon=True).start()

    stop = threading.Event()
    history = []
    clients = [Client(i, service, stop, history) for i in range(WORKERS)]
    threads = [threading.Thread(target=c.run) for c in clients]
    for thread in threads:
        thread.start()
    time.sleep(4)

    # Disruptions within the budgets: one etcd member (maxUnavailable), one dlockd (minAvailable).
    leader = etcd_leader(etcd_pods)
    assert leader is not None, "no etcd leader found"
    assert etcd_pdb["maxUnavailable"] >= 1, "the etcd budget allows no disruption"
    victim = dlockd_pods[0]
    assert len(service.ready) - 1 >= dlockd_pdb["minAvailable"], "dlockd budget forbids it"
    grants_before = len(history)
    leader.kill()
    victim.kill()
    killed_at = time.monotonic()
    service.remove(victim)
    dlockd_pods.remove(victim)
    say(f"kill -9 {leader.name} (the leader) and {victim.name}; {grants_before} grants so far")
    dlockd_pods.append(new_dlockd())
    say(f"Deployment replaced {victim.name} by {dlockd_pods[-1].name} (ready)")
    survivors = [p for p in etcd_pods if p is not leader]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(p.probe("readinessProbe") for p in survivors):
        time.sleep(0.1)
    quorum = all(p.probe("readinessProbe") for p in survivors)
    new_leader = etcd_leader(survivors)
    say(f"2 of 3 members healthy: {quorum}; new leader {new_leader.name if new_leader else None}")
    time.sleep(max(0.0, killed_at + 6 - time.monotonic()))
    grants_member_down = sum(1 for g in history if g[3] > killed_at)
    leader.start()
    leader.wait_ready(30)
    say(f"StatefulSet restarted {leader.name} on its volume; ready. "
        f"{grants_member_down} grants while a member was down")

    # Rolling update: maxSurge 1, maxUnavailable 0.
    rolling_started = time.monotonic()
    lifecycle = deployment["spec"]["template"]["spec"]["containers"][0]["lifecycle"]
    pre_stop = int(lifecycle["preStop"]["exec"]["command"][1])
    exit_codes = []
    for old in list(dlockd_pods):
        dlockd_pods.append(new_dlockd())
        while dlockd_pods[-1].name not in service.ready:
            time.sleep(0.05)
        service.remove(old)
        dlockd_pods.remove(old)
        time.sleep(pre_stop)
        stopping = time.monotonic()
        exit_codes.append(old.terminate(grace - pre_stop))
        say(f"rolling update: {dlockd_pods[-1].name} ready, {old.name} preStop {pre_stop} s, "
            f"SIGTERM, exit {exit_codes[-1]} after {time.monotonic() - stopping:.2f} s")
    grants_rolling = sum(1 for g in history if g[3] > rolling_started)
    time.sleep(2)
    stop.set()
    for thread in threads:
        thread.join(timeout=40)
    service.stop.set()

    failures = [f for c in clients for f in c.failures] + check_history(history)
    if isinstance(exposure["plain"], int) or exposure["no_token"] != 401 or exposure["metrics"] != 200:
        failures.append(f"dlockd exposure: {exposure} (want plain refused, 401, 200)")
    if not quorum:
        failures.append("the two remaining etcd members did not report healthy within 10 s")
    if grants_member_down == 0:
        failures.append("no grant while an etcd member was down")
    if grants_rolling == 0:
        failures.append("no grant during the rolling update")
    if any(code != 0 for code in exit_codes):
        failures.append(f"a dlockd did not exit 0 on SIGTERM within the grace period: {exit_codes}")
    if service.min_ready_after_start is None or service.min_ready_after_start < 1:
        failures.append(f"ready dlockd pods fell to {service.min_ready_after_start}")
    for pod in etcd_pods + dlockd_pods:
        if pod.running():
            pod.terminate(10)
    retries = sum(c.retries for c in clients)
    unavailable = sum(c.unavailable for c in clients)
    tokens = sorted(g[1] for g in history)
    reused = len(tokens) - len(set(tokens))
    lost = sum(1 for f in failures if "acknowledged grant" in f)
    say(f"{len(history)} acknowledged grants on {len(KEYS)} keys by {WORKERS} sessions, tokens "
        f"{tokens[0] if tokens else '-'}..{tokens[-1] if tokens else '-'}, {reused} reused, "
        f"{lost} answered as lost; "
        f"{retries} requests retried on another pod, {unavailable} acquires gave up; "
        f"fewest ready dlockd {service.min_ready_after_start} ({service.samples} samples)")
    for failure in failures:
        print(f"FAIL: {failure}")
    print(f"simulate: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        Pod.kill_all()
