"""check_openapi.py's backend-down cases: a dlockd on an etcd that stops answering answers every
/v1 route 503 (C3 "Errors": a backend that cannot answer is never "held"), and while those
requests are in flight a SIGTERM's drain turns /readyz 503 (C3 "Shutdown and readiness"). Each
answer is validated against docs/openapi.yaml by Checker.send."""
import http.client
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

from openapi_auth import REQUESTS
from openapi_report import fail

# Bound on every backend call of that dlockd: a call to the stopped etcd is 503 after this.
BACKEND_TIMEOUT = "2s"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """One etcd member on free loopback ports, its data on tmpfs when there is one. Started at
    once; wait_healthy() before use (it starts while another dlockd is checked)."""

    def __init__(self, binary, work):
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.data = tempfile.mkdtemp(prefix="dlock-openapi-etcd-", dir=base)
        client, peer = free_port(), free_port()
        self.endpoint = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self.log = open(os.path.join(work, "etcd.log"), "wb")
        self.process = subprocess.Popen(
            [binary, "--name", "m0", "--data-dir", os.path.join(self.data, "m0"),
             "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", f"m0={peer_url}", "--heartbeat-interval", "10",
             "--election-timeout", "100", "--logger", "zap"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.work = work

    def wait_healthy(self):
        deadline = time.monotonic() + 20
        while not self.healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"etcd did not start: see {self.work}/etcd.log")
            time.sleep(0.05)

    def healthy(self):
        try:
            connection = http.client.HTTPConnection(self.endpoint[7:], timeout=2)
            connection.request("GET", "/health")
            ok = connection.getresponse().status == 200
            connection.close()
            return ok
        except OSError:
            return False

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=20)
        self.log.close()
        subprocess.run(["rm", "-rf", self.data], check=False)


def exercise_backend_down(c, server, etcd):
    """Every /v1 route in flight on a stopped etcd, the server told to stop meanwhile: each is
    503, and /readyz on a connection opened before the SIGTERM is 503 while they drain."""
    sid = c.send("POST", "/v1/sessions", "/v1/sessions", 201, {"owner": "before-the-outage"})[1]
    sid = sid.get("session_id", "s0") if isinstance(sid, dict) else "s0"

    def live(text):  # REQUESTS name the made-up session s0: a real one reaches the backend
        return text.replace("s0", sid)

    # Connections opened (and used) before the SIGTERM, which stops accepting new ones: one
    # for /readyz and one per route, so a request read after the signal is still answered.
    idle = http.client.HTTPConnection(server.host, server.port, timeout=30)
    connections = [http.client.HTTPConnection(server.host, server.port, timeout=30)
                   for _ in REQUESTS]
    try:
        c.send("GET", "/readyz", "/readyz", 200, connection=idle)
        for connection in connections:
            c.send("GET", "/healthz", "/healthz", 200, connection=connection)
        etcd.process.send_signal(signal.SIGSTOP)
        in_flight = [threading.Thread(target=c.send, args=(
            method, template, live(path), 503,
            body and {k: live(v) if k == "session_id" else v for k, v in body.items()}),
            kwargs={"connection": connection})
            for (method, template, path, body), connection in zip(REQUESTS, connections)]
        for thread in in_flight:
            thread.start()
        # No metric shows a request waiting on the backend: give them a moment to get there
        # (they wait BACKEND_TIMEOUT, far longer). One in flight keeps the drain going; the
        # others are read on their open connections meanwhile.
        time.sleep(0.5)
        server.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 1.5
        while c.send("GET", "/readyz", "/readyz", (200, 503), connection=idle)[0] != 503:
            if time.monotonic() > deadline:
                fail("/readyz was not 503 while the server drained")
                break
            time.sleep(0.02)
        for thread in in_flight:
            thread.join(timeout=30)
    finally:
        for connection in [idle] + connections:
            connection.close()
        etcd.process.send_signal(signal.SIGCONT)
