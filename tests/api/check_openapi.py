#!/usr/bin/python3
"""docs/openapi.yaml kept in step with dlockd (contract C3).

    check_openapi.py OPENAPI_YAML DLOCKD WORK_DIR

1. The document: OpenAPI 3.1, every schema a valid JSON Schema 2020-12, every $ref resolves,
   every path parameter declared, operationIds unique, exactly the routes of C3.
2. A real dlockd (embedded store in WORK_DIR, admin API on, a small session cap) gets every
   route's success and error cases; each answer's status must be the one C3 names and must
   be documented for that operation, its body must validate against the documented schema
   (204: no body), and documented required headers (Retry-After) must be present.
Prints the number of answers validated and the (operation, status) pairs covered.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

import http.client
import jsonschema
import yaml

ADMIN_TOKEN = "dlk_openapiAdminToken0123456789abcdefghijklmn"
# C3's routes: (method, path template). The document must have exactly these operations.
C3_ROUTES = {
    ("post", "/v1/sessions"), ("post", "/v1/sessions/{session_id}/keepalive"),
    ("delete", "/v1/sessions/{session_id}"), ("post", "/v1/locks/{key}/acquire"),
    ("post", "/v1/locks/{key}/extend"), ("delete", "/v1/locks/{key}"),
    ("get", "/v1/locks/{key}"), ("get", "/v1/locks"), ("post", "/v1/admin/locks/{key}/revoke"),
    ("get", "/metrics"), ("get", "/healthz"), ("get", "/readyz"),
}
METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}
failures = []


def fail(message):
    failures.append(message)
    print(f"FAIL {message}", flush=True)


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


def check_document(doc):
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
    if operations != C3_ROUTES:
        fail(f"document: operations differ from C3: missing {C3_ROUTES - operations}, "
             f"extra {operations - C3_ROUTES}")
    if None in operation_ids or len(set(operation_ids)) != len(operation_ids):
        fail("document: operationIds missing or not unique")
    return len(operations)


class Server:
    def __init__(self, dlockd, work):
        os.makedirs(work, exist_ok=True)
        ready = os.path.join(work, "ready")
        if os.path.exists(ready):
            os.remove(ready)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "DLOCK_ADMIN_TOKEN": ADMIN_TOKEN}
        self.log = open(os.path.join(work, "dlockd.log"), "wb")
        self.process = subprocess.Popen(
            [dlockd, "--server-listen", "127.0.0.1:0", "--sqlite-path",
             os.path.join(work, "data", "dlock.db"), "--server-ready-file", ready,
             "--admin-enabled", "true", "--server-max-sessions", "20"],
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

    def operation(self, method, template):
        return self.doc["paths"][template][method.lower()]

    def send(self, method, template, path, expect, body=None, headers=None, raw=None):
        """One request; checks its answer against C3 (expect) and the document."""
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
    # Close.
    close = "/v1/sessions/{session_id}"
    c.send("DELETE", close, f"/v1/sessions/{sid}", 204)
    c.send("DELETE", close, f"/v1/sessions/{sid}", 404)
    c.send("DELETE", close, "/v1/sessions/bad!id", 400)
    # 429: the session cap (server.max.sessions = 20; bob is open).
    fillers = [c.send("POST", "/v1/sessions", "/v1/sessions", 201, {"owner": "filler"})[1]
               for _ in range(19)]
    c.send("POST", "/v1/sessions", "/v1/sessions", 429, {"owner": "one-too-many"})
    # 503: a waiting acquire answered by the shutdown.
    c.send("POST", acquire, "/v1/locks/shutdown-key/acquire", 200, {"session_id": bob_sid})
    waiting = threading.Thread(target=c.send, args=(
        "POST", acquire, "/v1/locks/shutdown-key/acquire", 503,
        {"session_id": fillers[0]["session_id"], "wait_ms": 20000}))
    waiting.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "dlock_waiters{backend=\"sqlite\"} 1" not in metrics(c):
        time.sleep(0.05)
    server.process.send_signal(signal.SIGTERM)
    waiting.join(timeout=30)


def metrics(c):
    connection = http.client.HTTPConnection(c.server.host, c.server.port, timeout=10)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    return text


def main():
    spec_path, dlockd, work = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(spec_path) as f:
        doc = yaml.safe_load(f)
    operations = check_document(doc)
    server = Server(dlockd, work)
    try:
        checker = Checker(doc, server)
        exercise(checker, server)
    finally:
        server.stop()
    documented = {(m, p, int(s)) for p, item in doc["paths"].items() for m, op in item.items()
                  if m in METHODS for s in op["responses"]}
    missing_success = {(m, p) for m, p in C3_ROUTES
                       if not any(c[0] == m and c[1] == p and c[2] < 300 for c in checker.covered)}
    if missing_success:
        fail(f"no success answer validated for {sorted(missing_success)}")
    print(f"check_openapi: {operations} operations; {checker.validated} answers validated; "
          f"{len(checker.covered)} of {len(documented)} documented (operation, status) pairs "
          f"exercised; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
