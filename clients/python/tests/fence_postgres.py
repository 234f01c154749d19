"""A throwaway PostgreSQL for the guard helper's tests (test_fence.py), started the way
tests/support/postgres_server.cc does: initdb into a temporary directory (as the user nobody
when run as root: PostgreSQL refuses root), trust authentication, a free loopback port."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def _bin_dir() -> str:
    if os.environ.get("DLOCK_PG_BIN_DIR"):
        return os.environ["DLOCK_PG_BIN_DIR"]
    for version in ("15", "16", "17", "14", "13"):
        candidate = f"/usr/lib/postgresql/{version}/bin"
        if os.path.exists(f"{candidate}/postgres"):
            return candidate
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if found:
        return os.path.dirname(found[-1])
    raise RuntimeError("PostgreSQL server binaries not found (install postgresql-15)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self):
        self._bin = _bin_dir()
        self.root = tempfile.mkdtemp(prefix="dlock-fence-pg-")
        self._user = None
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            self._user = nobody.pw_uid
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
        self.port = _free_port()
        data = os.path.join(self.root, "data")
        log = os.path.join(self.root, "postgres.log")
        self._run([f"{self._bin}/initdb", "-D", data, "-U", "dlock", "--auth=trust", "-E", "UTF8",
                   "--no-sync", "--no-instructions"])
        self._process = subprocess.Popen(
            [f"{self._bin}/postgres", "-D", data, "-p", str(self.port), "-h", "127.0.0.1",
             "-k", self.root, "-c", "fsync=off", "-c", "full_page_writes=off"],
            stdout=open(log, "ab"), stderr=subprocess.STDOUT, user=self._user,
            start_new_session=True)
        self.url = f"postgresql://dlock@127.0.0.1:{self.port}/postgres"
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                if self._ready():
                    return
            except OSError:
                pass
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"PostgreSQL did not start; see {log}")
            time.sleep(0.1)

    def _run(self, argv: list[str]) -> None:
        result = subprocess.run(argv, user=self._user, capture_output=True, text=True,
                                cwd=self.root)
        if result.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {result.stdout}{result.stderr}")

    def _ready(self) -> bool:
        return subprocess.run([f"{self._bin}/pg_isready", "-q", "-h", "127.0.0.1", "-p",
                               str(self.port)]).returncode == 0

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)  # fast shutdown: clients are ended
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self.root, ignore_errors=True)
