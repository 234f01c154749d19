#!/usr/bin/python3
"""packaging/dlockd.conf against the dlockd it ships with (CTest packaged_config_test).

    check_packaged_config.py DLOCKD CONF WORK_DIR

1. Every key in the file, set or commented out (`#key = value`), is a key of `dlockd --help`.
2. A commented line shows the key's default, as `dlockd --help` gives it, except the keys whose
   value is a file, a URL or a host: there it is an example.
3. Every key of `dlockd --help` is in the file, except server.ready.file (for tests and
   scripts) and admin.token (kept out of a world-readable file on purpose).
4. dlockd starts with the file, its paths moved into WORK_DIR, then with every commented line
   that shows a default uncommented too (each value parses), and stops cleanly."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlockd_launch import Dlockd  # noqa: E402

EXAMPLES = {"sqlite.path", "server.listen", "pg.url", "etcd.endpoints", "etcd.cacert",
            "etcd.cert", "etcd.key", "auth.tokens.file", "tls.cert.file", "tls.key.file",
            "tls.client.ca.file", "admin.token.file"}
NOT_IN_FILE = {"server.ready.file": "for tests and scripts",
               "admin.token": "a secret: admin.token.file or DLOCK_ADMIN_TOKEN instead"}
LINE = re.compile(r"^(#?)([a-z][a-z0-9.]*[a-z0-9])\s*=\s*(.*?)\s*$")


def help_keys(dlockd):
    text = subprocess.run([dlockd, "--help"], stdout=subprocess.PIPE, text=True, check=True).stdout
    return {key: default for key, default in
            re.findall(r"key ([a-z0-9.]+), env \S+, default (.*)", text)}


def main():
    dlockd, conf, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    keys = help_keys(dlockd)
    failures, entries = [], []
    for number, line in enumerate(open(conf, encoding="utf-8"), 1):
        match = LINE.match(line.rstrip("\n"))
        if match:
            entries.append((number, match.group(1) == "#", match.group(2), match.group(3)))
    for number, commented, key, value in entries:
        where = f"{conf}:{number}: {key}"
        if key not in keys:
            failures.append(f"{where}: not a key of dlockd --help")
        elif commented and key not in EXAMPLES and value != keys[key]:
            failures.append(f"{where}: shows {value!r}, dlockd's default is {keys[key]!r}")
    listed = {key for _, _, key, _ in entries}
    for key in sorted(set(keys) - listed - set(NOT_IN_FILE)):
        failures.append(f"{conf}: {key} (a key of dlockd --help) is missing")
    # Start dlockd with the file as shipped, then with the defaults spelled out too.
    for variant, uncomment in (("as shipped", False), ("defaults uncommented", True)):
        lines = []
        for _, commented, key, value in entries:
            if key in ("sqlite.path", "server.listen") or (commented and not uncomment):
                continue
            if commented and key in EXAMPLES:
                continue
            lines.append(f"{key} = {value}")
        path = os.path.join(work, f"{variant.replace(' ', '-')}.conf")
        with open(path, "w") as copy:
            copy.write("\n".join(lines) + "\n")
        try:
            server = Dlockd(dlockd, os.path.join(work, variant.replace(" ", "-")),
                            ["--config", path])
        except RuntimeError as error:
            failures.append(f"dlockd with the file {variant} ({path}): {error}")
            continue
        if server.stop() != 0:
            failures.append(f"dlockd with the file {variant}: did not stop cleanly")
    print(f"check_packaged_config: {len(entries)} keys in {conf} ({len(keys)} in dlockd --help)")
    for failure in failures:
        print(f"check_packaged_config: FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
