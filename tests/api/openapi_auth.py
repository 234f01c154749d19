"""check_openapi.py's authentication cases (C6 "Requests"): a dlockd with a tokens file answers
every /v1 route 401 without a token, 403 to a principal without the role (keepalive and close
need no role: another principal's session is 404), and 429 to an address throttled for bad
tokens, each validated against docs/openapi.yaml by Checker.send."""
import hashlib
import os
import secrets

from openapi_report import expect, fail
from openapi_watch import exercise_watch_auth

# A principal that may read one other namespace only: no role on "default", and no `lock`
# anywhere (opening a session needs it).
READER = "dlk_" + secrets.token_urlsafe(32)[:43]
# C6: an address is throttled after this many bad tokens (the Authenticator's default burst).
THROTTLE_BURST = 10

# One request per /v1 route: (method, template, path, body). Names and sessions are made up:
# authentication and the role are checked before either is looked at.
REQUESTS = [
    ("POST", "/v1/sessions", "/v1/sessions", {"owner": "o"}),
    ("GET", "/v1/sessions", "/v1/sessions", None),
    ("GET", "/v1/sessions/{session_id}", "/v1/sessions/s0", None),
    ("POST", "/v1/sessions/{session_id}/keepalive", "/v1/sessions/s0/keepalive", None),
    ("DELETE", "/v1/sessions/{session_id}", "/v1/sessions/s0", None),
    ("POST", "/v1/locks/{key}/acquire", "/v1/locks/k/acquire", {"session_id": "s0"}),
    ("POST", "/v1/locks/{key}/extend", "/v1/locks/k/extend",
     {"session_id": "s0", "fencing_token": 1}),
    ("DELETE", "/v1/locks/{key}", "/v1/locks/k?session_id=s0&fencing_token=1", None),
    ("GET", "/v1/locks/{key}", "/v1/locks/k", None),
    ("GET", "/v1/locks", "/v1/locks", None),
    ("POST", "/v1/semaphores/{name}/acquire", "/v1/semaphores/k/acquire",
     {"session_id": "s0", "limit": 1}),
    ("POST", "/v1/semaphores/{name}/extend", "/v1/semaphores/k/extend",
     {"session_id": "s0", "fencing_token": 1}),
    ("DELETE", "/v1/semaphores/{name}", "/v1/semaphores/k?session_id=s0&fencing_token=1", None),
    ("GET", "/v1/semaphores/{name}", "/v1/semaphores/k", None),
    ("POST", "/v1/elections/{name}/campaign", "/v1/elections/k/campaign",
     {"session_id": "s0", "value": "v"}),
    ("POST", "/v1/elections/{name}/proclaim", "/v1/elections/k/proclaim",
     {"session_id": "s0", "fencing_token": 1, "value": "v"}),
    ("POST", "/v1/elections/{name}/resign", "/v1/elections/k/resign",
     {"session_id": "s0", "fencing_token": 1}),
    ("GET", "/v1/elections/{name}", "/v1/elections/k", None),
    ("POST", "/v1/admin/locks/{key}/revoke", "/v1/admin/locks/k/revoke", None),
    ("POST", "/v1/admin/locks/{key}/clear-delay", "/v1/admin/locks/k/clear-delay", None),
]
# C6's table: these need no role, only the caller's own session (else 404); the session list
# shows the caller's own sessions.
NO_ROLE = {("POST", "/v1/sessions/{session_id}/keepalive"),
           ("DELETE", "/v1/sessions/{session_id}"),
           ("GET", "/v1/sessions/{session_id}"),
           ("GET", "/v1/sessions")}


def write_tokens_file(work):
    """The tokens file of the authenticating dlockd: READER's line only."""
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "tokens")
    digest = hashlib.sha256(READER.encode()).hexdigest()
    with open(path, "w") as f:
        f.write(f"# check_openapi.py\nreader {digest} read:elsewhere\n")
    os.chmod(path, 0o600)
    return path


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def exercise_auth(c):
    """Every /v1 route: 401 without a token, 403 for READER, then 429 for a bad token once its
    address is throttled."""
    for method, template, path, body in REQUESTS:
        c.send(method, template, path, 401, body, headers={})
        if c.last_headers.get("WWW-Authenticate") != "Bearer":
            fail(f"{method} {path} -> 401 without WWW-Authenticate: Bearer (C6)")
        if (method, template) not in NO_ROLE:
            expect(c.send(method, template, path, 403, body, headers=bearer(READER))[1],
                   code="permission_denied")
    exercise_watch_auth(c, {}, bearer(READER))
    # Another principal's sessions: only an administrator of every namespace lists them.
    expect(c.send("GET", "/v1/sessions", "/v1/sessions?principal=someone-else", 403,
                  headers=bearer(READER))[1], code="permission_denied")
    # An unknown token is 401 too, until the address has spent its burst of bad tokens.
    unknown = bearer("dlk_" + "x" * 43)
    for _ in range(THROTTLE_BURST):
        expect(c.send("GET", "/v1/locks", "/v1/locks", 401, headers=unknown)[1],
               code="unauthenticated")
    # Then its bad tokens are 429 on every route; a valid token from it is still accepted (C6
    # "Throttle": a principal whose token is valid never pays for another's failures).
    for method, template, path, body in REQUESTS:
        expect(c.send(method, template, path, 429, body, headers=unknown)[1],
               code="too_many_requests")
    c.send("GET", "/v1/locks", "/v1/locks?ns=elsewhere", 200, headers=bearer(READER))
    # The throttle is for /v1 only: the probes stay open.
    c.send("GET", "/healthz", "/healthz", 200, headers={})
