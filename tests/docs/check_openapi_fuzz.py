"""docs/openapi.yaml fuzzed by schemathesis against a real dlockd (embedded store). CTest
openapi_fuzz_test.

    check_openapi_fuzz.py DLOCKD OPENAPI_YAML WORK_DIR

Run by the test tools' python (tests/requirements.txt). Starts a fresh dlockd (admin API on,
admin.token set, so that every /v1 route takes a bearer token and the revoke route is served),
then `schemathesis run` with a bounded number of cases per operation, fixed seed:

- phases: examples, coverage (each schema's boundary and invalid values), fuzzing, stateful
  (sequences along the links schemathesis infers: open a session, acquire, extend, release);
- generation: positive and negative data (`--mode all`);
- checks: not_a_server_error, status_code_conformance, content_type_conformance,
  response_headers_conformance, response_schema_conformance, negative_data_rejection (data the
  document forbids must get a 4xx), missing_required_header (no bearer token: 401).
  positive_data_acceptance (data the document allows must not get a 400: the document gives
  the limits that are settings at their defaults, which this dlockd runs with).
- hooks (openapi_fuzz_hooks.py): one real session, whose id replaces well-formed session ids.

Then dlockd must still be alive and stop cleanly (exit 0 on SIGTERM)."""
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlockd_launch import Dlockd  # noqa: E402

ADMIN_TOKEN = "dlk_openapiFuzzAdminToken0123456789abcdefghijk"
EXAMPLES = int(os.environ.get("DLOCK_FUZZ_EXAMPLES", "40"))  # cases per operation and phase
SEED = os.environ.get("DLOCK_FUZZ_SEED", "41")  # fixed: a run repeats the last one
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,"
          "response_headers_conformance,response_schema_conformance,negative_data_rejection,"
          "missing_required_header,positive_data_acceptance")


def ask(server, method, path, body=None):
    request = urllib.request.Request(
        server.url + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def regressions(server):
    """What schemathesis found in the server, asked again on every run (its seed may not)."""
    failures = []
    _, session = ask(server, "POST", "/v1/sessions", {"owner": "regressions"})
    sid = session["session_id"]
    # A malformed query `ns` was not read (so not refused) when the body named `ns`.
    for path, body in (("/v1/locks/r/acquire", {"session_id": sid, "ns": "x"}),
                       ("/v1/locks/r/extend", {"session_id": sid, "fencing_token": 1, "ns": "x"}),
                       ("/v1/semaphores/r/acquire", {"session_id": sid, "limit": 2, "ns": "x"}),
                       ("/v1/elections/r/campaign", {"session_id": sid, "value": "v", "ns": "x"}),
                       ("/v1/elections/r/resign",
                        {"session_id": sid, "fencing_token": 1, "ns": "x"})):
        status, answer = ask(server, "POST", path + "?ns=bad!", body)
        field = (answer or {}).get("error", {}).get("field")
        if status != 400 or field != "ns":
            failures.append(f"POST {path}?ns=bad! with a body ns: {status} {answer}, not 400 ns")
    return failures


def main():
    dlockd, openapi, work = (os.path.abspath(arg) for arg in sys.argv[1:4])
    started = time.monotonic()
    server = Dlockd(dlockd, os.path.join(work, "dlockd"),
                    ["--admin-enabled", "true", "--lock-max-wait", "5m"],
                    env={"DLOCK_ADMIN_TOKEN": ADMIN_TOKEN})
    env = dict(os.environ, DLOCK_FUZZ_URL=server.url, DLOCK_FUZZ_TOKEN=ADMIN_TOKEN,
               SCHEMATHESIS_HOOKS="openapi_fuzz_hooks",
               PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    command = [sys.executable, "-m", "schemathesis.cli", "run", openapi, "--url", server.url,
               "--checks", CHECKS, "--mode", "all",
               "--phases", "examples,coverage,fuzzing,stateful",
               "--max-examples", str(EXAMPLES), "--seed", SEED,
               "--generation-database", "none", "--workers", "1", "--request-timeout", "15",
               "--header", f"Authorization: Bearer {ADMIN_TOKEN}",
               "--output-sanitize", "false", "--no-color", "--continue-on-failure",
               "--report", "junit", "--report-dir", os.path.join(work, "report")]
    failures = []
    try:
        status = subprocess.call(command, env=env, cwd=work)
        failures += regressions(server)
    finally:
        alive = server.process.poll() is None
        exit_status = server.stop()
    if status != 0:
        failures.append(f"schemathesis exited {status} (its report above)")
    if not alive:
        failures.append(f"dlockd died during the run: see {server.log_path}")
    elif exit_status != 0:
        failures.append(f"dlockd exited {exit_status} on SIGTERM: see {server.log_path}")
    print(f"check_openapi_fuzz: {EXAMPLES} cases per operation and phase, "
          f"{time.monotonic() - started:.1f} s")
    for failure in failures:
        print(f"check_openapi_fuzz: FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
