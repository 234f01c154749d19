"""schemathesis hooks of tests/docs/check_openapi_fuzz.py (loaded through SCHEMATHESIS_HOOKS).

At load, opens one real session on the dlockd under test (DLOCK_FUZZ_URL, with the admin token
DLOCK_FUZZ_TOKEN). Before each call, a `session_id` that is well-formed (a positive value: in the
path, the query or a JSON body) is replaced by that session's id, so that acquire, extend,
release, keepalive, campaign, proclaim and resign reach their logic instead of stopping at 404
`session_not_found`; and a valid `wait_ms` is cut to at most 100 ms, so that a waiting acquire,
campaign or observing read does not spend the run's time budget (the waits themselves are
tested in tests/integration). Two rules of the document that JSON Schema cannot state are
applied to valid data: a `fencing_token` in a body is written without a fraction (`5`, not
`5.0`, which JSON Schema counts as an integer; C3 "Numbers"), `after_value` comes only with `after_token`,
a watch has exactly one of `key` and `prefix`, a list of every namespace (`all_namespaces=true`)
names no `ns` or `prefix` and continues from a cursor that names a namespace, and the lengths
of keys, owners and values are bytes of UTF-8 (JSON Schema's maxLength counts characters), so a
valid string longer in bytes is cut to fit. Malformed
values (the negative cases) are left as generated."""
import json
import os
import re
import urllib.request

import schemathesis

_WELL_FORMED = re.compile(r"^[A-Za-z0-9_-]{1,128}$")  # components/schemas/SessionId


def _open_session():
    request = urllib.request.Request(
        os.environ["DLOCK_FUZZ_URL"] + "/v1/sessions", method="POST",
        data=json.dumps({"owner": "schemathesis", "ttl_ms": 3600000}).encode(),
        headers={"Authorization": "Bearer " + os.environ["DLOCK_FUZZ_TOKEN"],
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)["session_id"]


SESSION_ID = _open_session()


MAX_WAIT_MS = 100
# The byte limits of C3 (JSON Schema's maxLength gives them in characters).
MAX_BYTES = {"key": 512, "name": 512, "owner": 256, "value": 1024, "after_value": 1024,
             "prefix": 512}


def _utf8_length(text):
    return len(text.encode("utf-8", "surrogatepass"))


def _fit_bytes(container):
    if not isinstance(container, dict):
        return
    for field, limit in MAX_BYTES.items():
        value = container.get(field)
        if isinstance(value, str) and len(value) <= limit and _utf8_length(value) > limit:
            while _utf8_length(value) > limit:
                value = value[:-1]
            container[field] = value


def _swap(container):
    if not isinstance(container, dict):
        return
    value = container.get("session_id")
    if isinstance(value, str) and _WELL_FORMED.match(value):
        container["session_id"] = SESSION_ID
    wait = container.get("wait_ms")
    if isinstance(wait, int) and not isinstance(wait, bool) and wait > MAX_WAIT_MS:
        container["wait_ms"] = MAX_WAIT_MS
    elif isinstance(wait, str) and wait.isdigit() and int(wait) > MAX_WAIT_MS:
        container["wait_ms"] = str(MAX_WAIT_MS)


def _integral_token(body):
    if isinstance(body, dict):
        value = body.get("fencing_token")
        if isinstance(value, float) and value.is_integer() and value >= 0:
            body["fencing_token"] = int(value)


@schemathesis.hook
def before_call(context, case, kwargs):
    _swap(case.path_parameters)
    _swap(case.query)
    _swap(case.body)
    _integral_token(case.body)
    for container in (case.path_parameters, case.query, case.body):
        _fit_bytes(container)
    if isinstance(case.query, dict) and "after_value" in case.query and \
            "after_token" not in case.query:
        del case.query["after_value"]
    # GET /v1/watch takes exactly one of key and prefix (C3 "Watch").
    if case.operation.path == "/v1/watch" and isinstance(case.query, dict):
        if "key" in case.query and "prefix" in case.query:
            del case.query["prefix"]
        elif "key" not in case.query and "prefix" not in case.query:
            case.query["prefix"] = ""
    # GET /v1/locks?all_namespaces=true takes neither ns nor prefix, and its cursor is
    # <token>:<ns>/<key> (C3 GET /v1/locks).
    if case.operation.path == "/v1/locks" and isinstance(case.query, dict) and \
            str(case.query.get("all_namespaces")).lower() == "true":
        case.query.pop("ns", None)
        case.query.pop("prefix", None)
        if "/" not in str(case.query.get("after", "/")):
            del case.query["after"]
