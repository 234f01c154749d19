#!/usr/bin/python3
"""docs/openapi.yaml kept in step with dlockd (contract C3).

    check_openapi.py OPENAPI_YAML DLOCKD WORK_DIR [ETCD]

1. The document: OpenAPI 3.1, every schema a valid JSON Schema 2020-12, every $ref resolves,
   every path parameter declared, operationIds unique, exactly the routes of C3's route tables
   (docs/contracts/C3-http.md, parsed by openapi_coverage.py).
2. Real dlockd processes get every route's success and error cases; each answer's status must
   be the one C3 names and must be documented for that operation, its body must validate
   against the documented schema (204: no body), and documented required headers (Retry-After)
   must be present. Three servers: the embedded store (admin API on, small session and waiter
   caps; this file), one with a tokens file (401, 403, 429 on every /v1 route;
   openapi_auth.py) and, given ETCD, one on an etcd that stops answering (503 on every /v1
   route, /readyz 503 while draining; openapi_backend_down.py).
3. Every documented (operation, status) pair must have been exercised or be waived with a reason
   (openapi_coverage.py); a self-test shows that check and the route check fail on doctored
   copies of the document.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import http.client
import jsonschema
import yaml

from openapi_auth import exercise_auth, write_tokens_file
from openapi_backend_down import BACKEND_TIMEOUT, Etcd, exercise_backend_down
from openapi_coverage import (METHODS, c3_routes, coverage_failures, documented_pairs,
                              route_differences, self_test, waivers_for)
from openapi_elections import MAX_WAITERS, exercise_elections, shutdown_waiters
from openapi_watch import exercise_watch
from openapi_report import expect, fail, failures

ADMIN_TOKEN = "dlk_openapiAdminToken0123456789abcdefghijklmn"


def resolve(doc, ref):
    node = doc
    for part in ref.lstrip("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def walk_refs(doc, node, where):
    if isinstance(node, dict):
        if "$ref" in node:
            try:
                resolve(doc, node["$ref"])
            except (KeyError, TypeError):
                fail(f"document: {where}: $ref {node['$ref']} does not resolve")
        for key, value in node.items():
            walk_refs(doc, value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            walk_refs(doc, value, f"{where}/{index}")


def deref(doc, node):
    while isinstance(node, dict) and "$ref" in node and len(node) == 1:
        node = resolve(doc, node["$ref"])
    return node


def check_document(doc, routes):
    if not str(doc.get("openapi", "")).startswith("3.1."):
        fail("document: not OpenAPI 3.1")
    walk_refs(doc, doc, "#")
    for name, schema in doc["components"]["schemas"].items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as error:
            fail(f"document: schema {name}: {error.message}")
    operations = set()
    operation_ids = []
    for path, item in doc["paths"].items():
        shared = [deref(doc, p) for p in item.get("parameters", [])]
        for method, operation in item.items():
            if method not in METHODS:
                continue
            operations.add((method, path))
            operation_ids.append(operation.get("operationId"))
            params = shared + [deref(doc, p) for p in operation.get("parameters", [])]
            declared = {p["name"] for p in params if p["in"] == "path"}
            wanted = {segment[1:-1] for segment in path.split("/") if segment.startswith("{")}
            if declared != wanted:
                fail(f"document: {method} {path}: path parameters {declared} != {wanted}")
            if not operation.get("responses"):
                fail(f"document: {method} {path}: no responses")
            for status, response in operation.get("responses", {}).items():
                if not deref(doc, response).get("description"):
                    fail(f"document: {method} {path} {status}: no description")
    for message in route_differences(doc, routes):
        fail(message)
    if None in operation_ids or len(set(operation_ids)) != len(operation_ids):
        fail("document: operationIds missing or not unique")
    return len(operations)


class Server:
    def __init__(self, dlockd, work, extra_args=()):
        os.makedirs(work, exist_ok=True)
        self.database = os.path.join(work, "data", "dlock.db")
        ready = os.path.join(work, "ready")
        if os.path.exists(ready):
            os.remove(ready)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "DLOCK_ADMIN_TOKEN": ADMIN_TOKEN}
        self.log = open(os.path.join(work, "dlockd.log"), "wb")
        self.process = subprocess.Popen(
            [dlockd, "--server-listen", "127.0.0.1:0", "--sqlite-path",
             self.database, "--server-ready-file", ready,
             "--admin-enabled", "true", "--server-max-sessions", "20",
             "--server-max-waiters", str(MAX_WAITERS), *extra_args],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not (os.path.exists(ready) and open(ready).read().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dlockd did not start: see {work}/dlockd.log")
            time.sleep(0.02)
        host, port = open(ready).read().strip().rsplit(":", 1)
        self.host, self.port = host, int(port)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=20)
        self.log.close()


class Checker:
    def __init__(self, doc, server):
        self.doc = doc
        self.server = server
        self.validated = 0
        self.covered = set()
        self.last_headers = {}

    def operation(self, method, template):
        return self.doc["paths"][template][method.lower()]

    def send(self, method, template, path, expect, body=None, headers=None, raw=None,
             connection=None):
        """One request (on `connection`, kept open, if given); checks its answer against C3
        (expect) and the document."""
        keep = connection is not None
        if not keep:
            connection = http.client.HTTPConnection(self.server.host, self.server.port, timeout=30)
        payload = raw if raw is not None else (json.dumps(body) if body is not None else None)
        # Every request carries the admin token unless the case says otherwise: with
        # admin.token set, C6 asks for a bearer token on every /v1 route (admin:* implies
        # lock and read); a dlockd without that wiring ignores the header off the admin route.
        if headers is None:
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        connection.request(method, path, payload, headers)
        response = connection.getresponse()
        status, text = response.status, response.read()
        self.last_headers = response.headers  # for a sequential caller's own checks
        if not keep:
            connection.close()
        where = f"{method} {path} -> {status}"
        if status not in (expect if isinstance(expect, tuple) else (expect,)):
            fail(f"{where}: C3 says {expect} ({text[:200]!r})")
        parsed = json.loads(text) if text and "json" in (response.getheader("Content-Type") or "") else text
        if template is None or method.lower() not in self.doc["paths"][template]:
            # No such route or method (404 / 405): only the error shape is documented.
            self.validate(where, {"$ref": "#/components/schemas/Error"}, parsed)
            return status, parsed
        responses = self.operation(method, template)["responses"]
        documented = responses.get(str(status))
        if documented is None:
            fail(f"{where}: status {status} not documented for {method} {template}")
            return status, parsed
        self.covered.add((method.lower(), template, status))
        documented = deref(self.doc, documented)
        for name, header in documented.get("headers", {}).items():
            if deref(self.doc, header).get("required") and response.getheader(name) is None:
                fail(f"{where}: required header {name} missing")
        content = documented.get("content")
        if not content:
            if text:
                fail(f"{where}: documented without a body, got {text[:100]!r}")
            return status, parsed
        media = (response.getheader("Content-Type") or "").split(";")[0].strip()
        if media not in content:
            fail(f"{where}: Content-Type {media!r} not documented ({list(content)})")
            return status, parsed
        self.validate(where, content[media]["schema"], parsed if media != "text/plain"
                      else text.decode())
        return status, parsed

    def validate(self, where, schema, instance):
        root = dict(schema)
        root["components"] = self.doc["components"]
        errors = list(jsonschema.Draft202012Validator(root).iter_errors(instance))
        for error in errors:
            fail(f"{where}: {error.message} at {list(error.absolute_path)}: {instance}")
        self.validated += 1


def exercise(c, server):
    key, encoded = "payouts/batch-17", "payouts%2Fbatch-17"
    lock = "/v1/locks/{key}"
    c.send("GET", "/healthz", "/healthz", 200)
    c.send("GET", "/readyz", "/readyz", 200)
    c.send("GET", "/metrics", "/metrics", 200)
    c.send("GET", None, "/v1/nothing-here", 404)
    exercise_uri_too_long(c)
    # Sessions.
    _, alice = c.send("POST", "/v1/sessions", "/v1/sessions", 201, {"owner": "alice", "ttl_ms": 10000})
    _, bob = c.send("POST", "/v1/sessions", "/v1/sessions", 201, {"owner": "bob"})
    sid, bob_sid = alice["session_id"], bob["session_id"]
    c.send("POST", "/v1/sessions", "/v1/sessions", 400, {})
    c.send("POST", "/v1/sessions", "/v1/sessions", 400, {"owner": "a", "colour": "red"})
    c.send("POST", "/v1/sessions", "/v1/sessions", 400, raw="not json")
    c.send("POST", "/v1/sessions", "/v1/sessions", 400, {"owner": "a", "ttl_ms": 5})
    c.send("POST", "/v1/sessions", "/v1/sessions", 413, raw=json.dumps({"owner": "x" * 70000}))
    keepalive = "/v1/sessions/{session_id}/keepalive"
    c.send("POST", keepalive, f"/v1/sessions/{sid}/keepalive", 200)
    c.send("POST", keepalive, "/v1/sessions/nosuchsession/keepalive", 404)
    c.send("POST", keepalive, "/v1/sessions/bad!id/keepalive", 400)
    # Acquire, extend, read, list.
    acquire = lock + "/acquire"
    _, grant = c.send("POST", acquire, f"/v1/locks/{encoded}/acquire", 200,
                      {"session_id": sid, "ttl_ms": 10000})
    _, again = c.send("POST", acquire, f"/v1/locks/{encoded}/acquire", 200, {"session_id": sid})
    expect(grant, mode="exclusive", lease="ttl")
    if again.get("fencing_token", 0) <= grant.get("fencing_token", 0):
        fail("re-entrant acquire did not answer a greater token")
    token = again["fencing_token"]
    c.send("POST", acquire, f"/v1/locks/{encoded}/acquire", 409, {"session_id": bob_sid})
    c.send("POST", acquire, f"/v1/locks/{encoded}/acquire", 409,
           {"session_id": bob_sid, "wait_ms": 200})
    c.send("POST", acquire, f"/v1/locks/{encoded}/acquire", 404, {"session_id": "nosuchsession"})
    c.send("POST", acquire, f"/v1/locks/{encoded}/acquire", 400, {"session_id": sid, "ttl_ms": 5})
    c.send("POST", acquire, f"/v1/locks/{encoded}/acquire?ns=b@d", 400, {"session_id": sid})
    c.send("POST", acquire, f"/v1/locks/{encoded}/acquire", 400, {})
    c.send("PUT", acquire, f"/v1/locks/{encoded}/acquire", 405, {"session_id": sid})
    c.send("POST", acquire, f"/v1/locks/{encoded}/acquire", 413,
           raw=json.dumps({"session_id": sid, "pad": "x" * 70000}))
    extend = lock + "/extend"
    _, extended = c.send("POST", extend, f"/v1/locks/{encoded}/extend", 200,
                         {"session_id": sid, "fencing_token": token, "ttl_ms": 20000})
    if extended.get("fencing_token") != token:
        fail("extend changed the token")
    c.send("POST", extend, f"/v1/locks/{encoded}/extend", 409,
           {"session_id": sid, "fencing_token": grant["fencing_token"]})
    c.send("POST", extend, f"/v1/locks/{encoded}/extend", 400, {"session_id": sid})
    c.send("POST", extend, f"/v1/locks/{encoded}/extend", 404,
           {"session_id": "nosuchsession", "fencing_token": token})
    c.send("GET", lock, f"/v1/locks/{encoded}", 200)
    c.send("GET", lock, "/v1/locks/nothing-held-here", 404)
    c.send("GET", lock, "/v1/locks/bad%zzkey", 400)
    _, listed = c.send("GET", "/v1/locks", "/v1/locks?prefix=payouts", 200)
    if [entry["key"] for entry in listed.get("locks", [])] != [key]:
        fail(f"list did not find {key}: {listed}")
    c.send("GET", "/v1/locks", "/v1/locks?limit=0", 400)
    c.send("GET", "/v1/locks", "/v1/locks?prefix=" + "p" * 600, 400)
    # Paging (C3 "Paging"): a page after the only lock is empty and has no `next`.
    _, paged = c.send("GET", "/v1/locks", f"/v1/locks?prefix=payouts&limit=1&after={token}%3A{encoded}", 200)
    if paged.get("locks") or "next" in paged:
        fail(f"the page after the last lock is not empty: {paged}")
    c.send("GET", "/v1/locks", "/v1/locks?after=zz", 400)
    # Release.
    release = f"/v1/locks/{encoded}?session_id={sid}&fencing_token="
    c.send("DELETE", lock, release + str(grant["fencing_token"]), 409)
    c.send("DELETE", lock, release + str(token), 204)
    c.send("DELETE", lock, release + str(token), 409)
    c.send("DELETE", lock, f"/v1/locks/{encoded}?session_id={sid}", 400)
    c.send("DELETE", lock, f"/v1/locks/{encoded}?session_id=nosuchsession&fencing_token=1", 404)
    # Admin revoke.
    revoke = "/v1/admin/locks/{key}/revoke"
    _, regrant = c.send("POST", acquire, f"/v1/locks/{encoded}/acquire", 200, {"session_id": bob_sid})
    c.send("POST", revoke, f"/v1/admin/locks/{encoded}/revoke", 401, headers={})
    # An unknown token: 403 under C3's admin.token check, 401 under C6's authentication.
    c.send("POST", revoke, f"/v1/admin/locks/{encoded}/revoke", (401, 403),
           headers={"Authorization": "Bearer dlk_wrongToken0123456789abcdefghijklmnopqrstu"})
    _, outcome = c.send("POST", revoke, f"/v1/admin/locks/{encoded}/revoke", 200)
    if outcome.get("fencing_token") != regrant.get("fencing_token"):
        fail(f"revoke answered {outcome}, not the grant {regrant.get('fencing_token')}")
    c.send("POST", revoke, f"/v1/admin/locks/{encoded}/revoke", 200)
    c.send("POST", revoke, "/v1/admin/locks/bad%zzkey/revoke", 400)
    exercise_lock_delay(c)
    exercise_session_views(c, sid)
    exercise_watch(c, sid, MAX_WAITERS)
    # Read-write locks and semaphores; closing carol frees her permit.
    _, carol = c.send("POST", "/v1/sessions", "/v1/sessions", 201, {"owner": "carol"})
    exercise_modes(c, sid, bob_sid, carol["session_id"])
    exercise_semaphores(c, sid, bob_sid, carol["session_id"])
    exercise_elections(c, sid, bob_sid, carol["session_id"])
    # Close.
    close = "/v1/sessions/{session_id}"
    c.send("DELETE", close, f"/v1/sessions/{carol['session_id']}", 204)
    _, freed = c.send("GET", "/v1/semaphores/{name}", "/v1/semaphores/gpu%2Fpool", 200)
    if freed.get("holders") != []:
        fail(f"closing carol's session did not free her permit: {freed}")
    c.send("DELETE", close, f"/v1/sessions/{sid}", 204)
    c.send("DELETE", close, f"/v1/sessions/{sid}", 404)
    c.send("DELETE", close, "/v1/sessions/bad!id", 400)
    # 429: the session cap (server.max.sessions = 20; bob is open).
    fillers = [c.send("POST", "/v1/sessions", "/v1/sessions", 201, {"owner": "filler"})[1]
               for _ in range(19)]
    c.send("POST", "/v1/sessions", "/v1/sessions", 429, {"owner": "one-too-many"})
    # 503: a waiting lock acquire, permit acquire, campaign and observer answered by the
    # shutdown; while they wait, server.max.waiters answers 429 (openapi_elections.py).
    permit = "/v1/semaphores/{name}/acquire"
    c.send("POST", acquire, "/v1/locks/shutdown-key/acquire", 200, {"session_id": bob_sid})
    c.send("POST", permit, "/v1/semaphores/shutdown-pool/acquire", 200,
           {"session_id": bob_sid, "limit": 1})
    waiting = [threading.Thread(target=c.send, args=(
        "POST", template, path, 503, dict(body, session_id=filler["session_id"], wait_ms=20000)))
        for template, path, body, filler in (
            (acquire, "/v1/locks/shutdown-key/acquire", {}, fillers[0]),
            (permit, "/v1/semaphores/shutdown-pool/acquire", {"limit": 1}, fillers[1]))]
    over_the_cap, election_waiting = shutdown_waiters(c, bob_sid, fillers[2]["session_id"],
                                                      fillers[3]["session_id"])
    waiting += election_waiting
    for thread in waiting:
        thread.start()
    deadline = time.monotonic() + 10
    all_waiting = f"dlock_waiters{{backend=\"sqlite\"}} {MAX_WAITERS}"
    while time.monotonic() < deadline and all_waiting not in metrics(c):
        time.sleep(0.05)
    over_the_cap()
    server.process.send_signal(signal.SIGTERM)
    for thread in waiting:
        thread.join(timeout=30)


def exercise_session_views(c, sid):
    """C3 "Sessions": the list in pages (`next` while more follow) and one session."""
    owner = "viewed-" + str(os.getpid())
    opened = [c.send("POST", "/v1/sessions", "/v1/sessions", 201, {"owner": owner + name})[1]
              for name in ("a", "b", "c")]
    _, page = c.send("GET", "/v1/sessions", f"/v1/sessions?owner={owner}&limit=2", 200)
    if len(page.get("sessions", [])) != 2 or "next" not in page:
        fail(f"the first page of three sessions by two is not full with a next: {page}")
    _, rest = c.send("GET", "/v1/sessions",
                     f"/v1/sessions?owner={owner}&limit=2&after={page['next']}", 200)
    if len(rest.get("sessions", [])) != 1 or "next" in rest:
        fail(f"the last page is not one session without a next: {rest}")
    c.send("GET", "/v1/sessions", "/v1/sessions?limit=0", 400)
    c.send("GET", "/v1/sessions", "/v1/sessions?after=bad!id", 400)
    one = "/v1/sessions/{session_id}"
    _, shown = c.send("GET", one, f"/v1/sessions/{sid}", 200)
    if shown.get("session_id") != sid:
        fail(f"GET of session {sid} answered {shown}")
    c.send("GET", one, "/v1/sessions/nosuchsession", 404)
    c.send("GET", one, "/v1/sessions/bad!id", 400)
    for session in opened:  # the session cap's check below counts the open ones
        c.send("DELETE", one, f"/v1/sessions/{session['session_id']}", 204)


def exercise_lock_delay(c):
    """C3 "Lock-delay": a revoked grant of a session with a delay; the key's GET (404), the list
    and a refused acquire name the delay's end; an admin clears it."""
    _, dave = c.send("POST", "/v1/sessions", "/v1/sessions", 201,
                     {"owner": "dave", "lock_delay_ms": 60000})
    key = "delayed%2Fkey"
    acquire = "/v1/locks/{key}/acquire"
    c.send("POST", acquire, f"/v1/locks/{key}/acquire", 200, {"session_id": dave["session_id"]})
    c.send("POST", "/v1/admin/locks/{key}/revoke", f"/v1/admin/locks/{key}/revoke", 200)
    _, missing = c.send("GET", "/v1/locks/{key}", f"/v1/locks/{key}", 404)
    until = missing.get("error", {}).get("delayed_until")
    if not until:
        fail(f"the read of a delayed key does not name the delay: {missing}")
    _, listed = c.send("GET", "/v1/locks", "/v1/locks?prefix=delayed", 200)
    if [entry["key"] for entry in listed.get("delays", [])] != ["delayed/key"]:
        fail(f"the list does not name the delayed key: {listed}")
    _, held = c.send("POST", acquire, f"/v1/locks/{key}/acquire", 409,
                     {"session_id": dave["session_id"]})
    if "delayed_until" not in held.get("error", {}):
        fail(f"a 409 caused by a lock-delay does not say so: {held}")
    clear = "/v1/admin/locks/{key}/clear-delay"
    _, cleared = c.send("POST", clear, f"/v1/admin/locks/{key}/clear-delay", 200)
    if cleared != {"cleared": True}:
        fail(f"clear-delay answered {cleared}")
    c.send("POST", clear, f"/v1/admin/locks/{key}/clear-delay", 200)
    c.send("POST", clear, "/v1/admin/locks/bad%zzkey/clear-delay", 400)
    c.send("POST", clear, f"/v1/admin/locks/{key}/clear-delay", 401, headers={})
    c.send("POST", clear, f"/v1/admin/locks/{key}/clear-delay", (401, 403),
           headers={"Authorization": "Bearer dlk_wrongToken0123456789abcdefghijklmnopqrstu"})
    c.send("POST", acquire, f"/v1/locks/{key}/acquire", 200, {"session_id": dave["session_id"]})
    c.send("DELETE", "/v1/sessions/{session_id}", f"/v1/sessions/{dave['session_id']}", 204)


def exercise_modes(c, sid, bob_sid, carol_sid):
    """"mode" on lock acquire: shared holders, their reads, extend and release (ADR-0020)."""
    lock, key, path = "/v1/locks/{key}", "reports/daily", "/v1/locks/reports%2Fdaily"

    def acquire(status, **body):
        return c.send("POST", lock + "/acquire", path + "/acquire", status, body)[1]

    def release(status, session, token):
        c.send("DELETE", lock, f"{path}?session_id={session}&fencing_token={token}", status)

    for mode in ("permit", "", 7):
        expect(acquire(400, session_id=sid, mode=mode), code="invalid_argument", field="mode")
    mine = acquire(200, session_id=sid, mode="exclusive")
    expect(mine, mode="exclusive")
    release(204, sid, mine.get("fencing_token"))
    a = acquire(200, session_id=sid, mode="shared")
    b = acquire(200, session_id=bob_sid, mode="shared", lease="session")
    expect(a, mode="shared")
    expect(b, mode="shared", lease="session")
    tokens = [a.get("fencing_token", 0), b.get("fencing_token", 0)]
    if tokens[1] <= tokens[0]:
        fail(f"the second shared holder's token {tokens[1]} is not greater than {tokens[0]}")
    expect(acquire(409, session_id=carol_sid), code="held")
    expect(acquire(409, session_id=carol_sid, mode="exclusive", wait_ms=200), code="held")
    _, read = c.send("GET", lock, path, 200)
    expect(read, key=key, mode="shared", fencing_token=tokens[1])
    if [h.get("fencing_token") for h in read.get("holders", [])] != tokens:
        fail(f"GET {path}: holders are not the two shared holders in token order: {read}")
    _, listed = c.send("GET", "/v1/locks", "/v1/locks?prefix=reports", 200)
    if [(e["key"], e["mode"]) for e in listed.get("locks", [])] != [(key, "shared")] * 2:
        fail(f"list did not find the two shared holders of {key}: {listed}")
    _, extended = c.send("POST", lock + "/extend", path + "/extend", 200,
                         {"session_id": sid, "fencing_token": tokens[0], "ttl_ms": 20000})
    expect(extended, mode="shared", fencing_token=tokens[0])
    release(204, sid, tokens[0])
    expect(acquire(409, session_id=carol_sid), code="held")
    release(204, bob_sid, tokens[1])
    release(409, bob_sid, tokens[1])
    c.send("GET", lock, path, 404)


def exercise_semaphores(c, sid, bob_sid, carol_sid):
    """/v1/semaphores/{name}: every operation's success and error answers (ADR-0020)."""
    semaphore, name, path = "/v1/semaphores/{name}", "gpu/pool", "/v1/semaphores/gpu%2Fpool"

    def acquire(status, query="", **body):
        return c.send("POST", semaphore + "/acquire", path + "/acquire" + query, status, body)[1]

    def extend(status, **body):
        return c.send("POST", semaphore + "/extend", path + "/extend", status, body)[1]

    def release(status, query):
        return c.send("DELETE", semaphore, f"{path}?{query}", status)[1]

    a = acquire(200, session_id=sid, limit=2, ttl_ms=10000)
    b = acquire(200, session_id=bob_sid, limit=2, lease="session", ns="default")
    expect(a, key=name, mode="permit", limit=2)
    expect(b, mode="permit", limit=2, lease="session")
    tokens = [a.get("fencing_token", 0), b.get("fencing_token", 0)]
    if tokens[1] <= tokens[0]:
        fail(f"the second permit's token {tokens[1]} is not greater than {tokens[0]}")
    expect(acquire(409, session_id=carol_sid, limit=2), code="held")
    expect(acquire(409, session_id=carol_sid, limit=2, wait_ms=200), code="held")
    expect(acquire(409, session_id=carol_sid, limit=3), code="conflict", field="limit")
    # Locks and semaphores share the key space: a permit holds off a lock of the name.
    expect(c.send("POST", "/v1/locks/{key}/acquire", "/v1/locks/gpu%2Fpool/acquire", 409,
                  {"session_id": carol_sid})[1], code="held")
    _, read = c.send("GET", semaphore, path, 200)
    expect(read, name=name, limit=2)
    if [h.get("fencing_token") for h in read.get("holders", [])] != tokens:
        fail(f"GET {path}: holders are not the two permits in token order: {read}")
    _, as_lock = c.send("GET", "/v1/locks/{key}", "/v1/locks/gpu%2Fpool", 200)
    expect(as_lock, mode="permit", limit=2, fencing_token=tokens[1])
    extended = extend(200, session_id=sid, fencing_token=tokens[0], ttl_ms=20000)
    expect(extended, mode="permit", fencing_token=tokens[0])
    expect(extend(409, session_id=sid, fencing_token=1), code="lock_lost")
    expect(extend(400, session_id=sid), field="fencing_token")
    extend(404, session_id="nosuchsession", fencing_token=tokens[0])
    release(204, f"session_id={bob_sid}&fencing_token={tokens[1]}")
    expect(release(409, f"session_id={bob_sid}&fencing_token={tokens[1]}"), code="lock_lost")
    expect(release(400, f"session_id={bob_sid}"), field="fencing_token")
    release(404, "session_id=nosuchsession&fencing_token=1")
    # Bad input names its field.
    for field, body in (("limit", {}), ("limit", {"limit": 0}), ("limit", {"limit": 1025}),
                        ("mode", {"limit": 2, "mode": "shared"}),
                        ("ttl_ms", {"limit": 2, "ttl_ms": 5}),
                        ("ttl_ms", {"limit": 2, "ttl_ms": 5000, "lease": "session"}),
                        ("session_id", {"session_id": None, "limit": 2})):
        expect(acquire(400, **dict({"session_id": carol_sid}, **body)), field=field)
    expect(acquire(400, "?ns=b@d", session_id=carol_sid, limit=2), field="ns")
    acquire(404, session_id="nosuchsession", limit=2)
    c.send("POST", semaphore + "/acquire", path + "/acquire", 413,
           raw=json.dumps({"session_id": carol_sid, "limit": 2, "pad": "x" * 70000}))
    c.send("PUT", semaphore, path, 405)
    c.send("POST", None, path + "/other", 405, {"session_id": carol_sid})
    c.send("GET", semaphore, "/v1/semaphores/bad%zzname", 400)
    release(204, f"session_id={sid}&fencing_token={tokens[0]}")
    # No holder left: no limit, no holders (also for a name never used); a new limit is taken.
    for empty in (path, "/v1/semaphores/never-used"):
        _, read = c.send("GET", semaphore, empty, 200)
        if read.get("holders") != [] or "limit" in read:
            fail(f"GET {empty}: not an empty semaphore: {read}")
    expect(acquire(200, session_id=carol_sid, limit=3), limit=3)


def exercise_uri_too_long(c):
    """414 on every operation: a request target over 8 KiB (C5 "Fixed bounds"), found by
    schemathesis (tests/docs/check_openapi_fuzz.py) as an undocumented status."""
    for template, item in c.doc["paths"].items():
        for method in item:
            if method not in METHODS:
                continue
            path = re.sub(r"\{[^}]*\}", "k", template) + "?pad=" + "x" * 9000
            c.send(method.upper(), template, path, 414)


def metrics(c):
    connection = http.client.HTTPConnection(c.server.host, c.server.port, timeout=10)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    return text


def run(doc, dlockd, work, extra_args, exercise_with):
    """One dlockd; its answers' (operation, status) pairs and how many were validated."""
    server = Server(dlockd, work, extra_args)
    try:
        checker = Checker(doc, server)
        exercise_with(checker, server)
    finally:
        server.stop()
    return checker.covered, checker.validated


def main():
    spec_path, dlockd, work = sys.argv[1], sys.argv[2], sys.argv[3]
    etcd_binary = sys.argv[4] if len(sys.argv) > 4 else ""
    with open(spec_path) as f:
        doc = yaml.safe_load(f)
    with open(os.path.join(os.path.dirname(spec_path), "contracts", "C3-http.md")) as f:
        routes = c3_routes(f.read())
    operations = check_document(doc, routes)
    etcd = None
    if etcd_binary:  # for the third dlockd; it starts while the first two are checked
        os.makedirs(os.path.join(work, "etcd"), exist_ok=True)
        etcd = Etcd(etcd_binary, os.path.join(work, "etcd"))
    try:
        covered, validated = run(doc, dlockd, os.path.join(work, "open"), (), exercise)
        # A second dlockd with a tokens file (C6): 401, 403 and the throttle's 429 on every route.
        auth_work = os.path.join(work, "auth")
        tokens = ["--auth-tokens-file", write_tokens_file(auth_work)]
        more = run(doc, dlockd, auth_work, tokens, lambda checker, _: exercise_auth(checker))
        covered, validated = covered | more[0], validated + more[1]
        if etcd:
            # A third on an etcd that stops answering: 503 on every route, /readyz 503 draining.
            etcd.wait_healthy()
            more = run(doc, dlockd, etcd.work, ["--lock-backend", "etcd", "--etcd-endpoints",
                                                etcd.endpoint, "--backend-timeout",
                                                BACKEND_TIMEOUT],
                       lambda checker, server: exercise_backend_down(checker, server, etcd))
            covered, validated = covered | more[0], validated + more[1]
    finally:
        if etcd:
            etcd.stop()
    waivers = waivers_for(doc, covered, with_etcd=bool(etcd_binary))
    missing_success = {(m, p) for p, item in doc["paths"].items() for m in item if m in METHODS
                       if not any(c[0] == m and c[1] == p and c[2] < 300 for c in covered)}
    if missing_success:
        fail(f"no success answer validated for {sorted(missing_success)}")
    for message in coverage_failures(doc, covered, waivers):
        fail(message)
    for message in self_test(doc, covered, waivers, routes):
        fail(message)
    print(f"check_openapi: {operations} operations ({len(routes)} routes in C3); {validated} "
          f"answers validated; {len(covered)} of {len(documented_pairs(doc))} documented "
          f"(operation, status) pairs exercised, {len(waivers)} waived; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
