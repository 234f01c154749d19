#!/usr/bin/env python3
"""Measures dlockd's RSS with N open idle connections (contract C6; run by hand).

usage: tests/manual/idle_connections_rss.py BUILD_DIR [N]

Starts BUILD_DIR/src/exe/dlockd on a temporary SQLite file with server.max.connections and
server.header.timeout large enough, raises RLIMIT_NOFILE (dlockd inherits it), opens N idle TCP
connections, and prints VmRSS before and after, and per connection.
"""
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    build = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count * 2 + 1024), hard))
    with tempfile.TemporaryDirectory() as tmp:
        ready = os.path.join(tmp, "ready")
        dlockd = subprocess.Popen(
            [os.path.join(build, "src/exe/dlockd"), "--server-listen", "127.0.0.1:0",
             "--server-ready-file", ready, "--sqlite-path", os.path.join(tmp, "dlock.db"),
             "--server-max-connections", str(count * 2), "--server-header-timeout", "10m"],
            stdout=subprocess.DEVNULL)
        try:
            while not os.path.exists(ready):
                time.sleep(0.05)
            host, port = open(ready).read().strip().rsplit(":", 1)
            time.sleep(0.5)
            before = rss_kib(dlockd.pid)
            sockets = []
            for _ in range(count):
                sockets.append(socket.create_connection((host, int(port))))
            time.sleep(2)
            after = rss_kib(dlockd.pid)
            print(f"connections={count} rss_before_kib={before} rss_after_kib={after} "
                  f"per_connection_bytes={(after - before) * 1024 // count}")
            for s in sockets:
                s.close()
        finally:
            dlockd.terminate()
            dlockd.wait()


if __name__ == "__main__":
    main()
