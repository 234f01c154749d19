"""Drives tests/clients/harness.cc (tests/clients/README.md) through a pipe."""

from __future__ import annotations

import json
import subprocess


class HarnessError(Exception):
    pass


class Harness:
    """One harness process: the servers of one backend, started once per test session."""

    def __init__(self, binary: str, backend: str):
        self.backend = backend
        self._process = subprocess.Popen(
            [binary, backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        hello = self._read()
        if "servers" not in hello:
            self.close()
            raise HarnessError(f"harness for {backend} did not start: {hello}")
        self.servers: list[str] = hello["servers"]
        self.auth_server: str = hello["auth_server"]
        self.tls_server: str = hello["tls_server"]
        self.tls_files: dict[str, str] = hello["tls"]
        self.admin_token: str = hello["admin_token"]
        self.tokens: dict[str, str] = hello["tokens"]
        self.stopped: set[str] = set()  # servers (and "backend") a scenario left down

    def _read(self) -> dict:
        line = self._process.stdout.readline()
        if not line:
            raise HarnessError(f"harness for {self.backend} exited ({self._process.poll()})")
        return json.loads(line)

    def command(self, line: str) -> dict:
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()
        answer = self._read()
        if not answer.get("ok"):
            raise HarnessError(f"{line}: {answer.get('error')}")
        words = line.split()
        what = "backend" if words[0].startswith("backend_") else words[-1]
        if words[0] in ("kill9", "stop", "backend_stop"):
            self.stopped.add(what)
        elif words[0] in ("start", "restart", "backend_start"):
            self.stopped.discard(what)
        return answer

    def bring_back(self) -> None:
        """Starts whatever a scenario left stopped, so the next one finds every server up."""
        if "backend" in self.stopped:
            self.command("backend_start")
        for server in sorted(self.stopped):
            self.command(f"start {server}")

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._process.stdin.write("quit\n")
                self._process.stdin.flush()
                self._process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
