"""check_openapi.py's watch cases (C3 "Watch", ADR-0032): GET /v1/watch's answers from a real
dlockd, each validated against docs/openapi.yaml by Checker.send."""
import threading
import time

from openapi_report import expect, fail

WATCH = "/v1/watch"


def exercise_watch(c, sid, max_waiters):
    """Events after a position, a reset for another process's position, bad queries (400) and
    the cap on waiting watches (429): `max_waiters` of them wait, one more is refused."""
    _, start = c.send("GET", WATCH, f"{WATCH}?prefix=watched%2F", 200)
    _, grant = c.send("POST", "/v1/locks/{key}/acquire", "/v1/locks/watched%2Fa/acquire", 200,
                      {"session_id": sid})
    _, page = c.send("GET", WATCH, f"{WATCH}?prefix=watched%2F&after={start.get('next')}", 200)
    kinds = [(e.get("kind"), e.get("key"), e.get("fencing_token")) for e in page.get("events", [])]
    if kinds != [("grant", "watched/a", grant.get("fencing_token"))]:
        fail(f"the watch after {start} did not answer the grant {grant}: {page}")
    _, reset = c.send("GET", WATCH, f"{WATCH}?key=watched%2Fa&after=0123456789abcdef.1", 200)
    if [e.get("kind") for e in reset.get("events", [])] != ["reset"]:
        fail(f"another process's position was not answered with a reset: {reset}")
    for query in ("", "?key=a&prefix=b", "?key=a&after=XYZ", "?key=a&wait_ms=-1",
                  "?key=a&limit=0", "?key=a&ns=b@d"):
        c.send("GET", WATCH, WATCH + query, 400)
    # The cap: server.max.waiters waiting watches (counted apart from waiting acquires).
    key = "watch-cap"
    waiting = [threading.Thread(target=c.send, args=("GET", WATCH, f"{WATCH}?key={key}&wait_ms=20000", 200))
               for _ in range(max_waiters)]
    for thread in waiting:
        thread.start()
    time.sleep(1)  # no metric shows a waiting watch: give them a moment to get there
    expect(c.send("GET", WATCH, f"{WATCH}?key={key}&wait_ms=1000", 429)[1],
           code="too_many_requests")
    # An event of the key answers every waiting watch at once.
    c.send("POST", "/v1/locks/{key}/acquire", f"/v1/locks/{key}/acquire", 200, {"session_id": sid})
    for thread in waiting:
        thread.join(timeout=10)


def exercise_watch_auth(c, unauthenticated, reader):
    """401 without a token, 403 without the read role on the namespace."""
    c.send("GET", WATCH, f"{WATCH}?key=k", 401, headers=unauthenticated)
    expect(c.send("GET", WATCH, f"{WATCH}?key=k", 403, headers=reader)[1],
           code="permission_denied")
