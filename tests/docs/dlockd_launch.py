"""A fresh dlockd on the embedded store, started as tests/api/check_openapi.py starts one: a port
the kernel picks (server.listen 127.0.0.1:0), the bound address read from server.ready.file.
Standard library only: the doc-example runner runs under /usr/bin/python3, the OpenAPI fuzz test
under the test tools' virtual environment."""
import os
import signal
import subprocess
import time


def sanitizer_options():
    """ASAN_OPTIONS and UBSAN_OPTIONS from CTest, for a sanitizer build's dlockd and dlock."""
    return {name: os.environ[name] for name in ("ASAN_OPTIONS", "UBSAN_OPTIONS")
            if name in os.environ}


class Dlockd:
    def __init__(self, dlockd, work, extra_args=(), env=None):
        os.makedirs(work, exist_ok=True)
        self.work = work
        ready = os.path.join(work, "ready")
        if os.path.exists(ready):
            os.remove(ready)
        self.log_path = os.path.join(work, "dlockd.log")
        self.log = open(self.log_path, "wb")
        environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        environment.update(sanitizer_options())
        environment.update(env or {})
        self.process = subprocess.Popen(
            [dlockd, "--server-listen", "127.0.0.1:0",
             "--sqlite-path", os.path.join(work, "data", "dlock.db"),
             "--server-ready-file", ready, *extra_args],
            env=environment, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not (os.path.exists(ready) and open(ready).read().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"dlockd did not start: see {self.log_path}")
            time.sleep(0.02)
        self.address = open(ready).read().strip()
        self.url = f"http://{self.address}"

    def stop(self):
        """SIGTERM, and the exit status (0 after a clean drain)."""
        terminate(self.process, 20)
        self.log.close()
        return self.process.returncode


def terminate(process, timeout):
    """SIGTERM, then SIGKILL if `process` has not exited within `timeout` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
