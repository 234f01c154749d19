"""check_openapi.py's election cases (C3 "Elections", ADR-0020): every operation's success and
error answers from a real dlockd, each validated against docs/openapi.yaml by Checker.send."""
import functools
import json
import threading
import time

from openapi_report import expect, fail

ELECTION = "/v1/elections/{name}"
# server.max.waiters of the test's dlockd. It caps waiting acquires and, counted apart, waiting
# observers: the shutdown's three waiting acquires (a lock, a permit, a campaign) and three
# observers fill it, so one more waiting campaign or observer is 429.
MAX_WAITERS = 3


def election_post(c, path, operation, status, query="", raw=None, **body):
    """POST {path}/{operation}{query}; the answer's body."""
    return c.send("POST", f"{ELECTION}/{operation}", f"{path}/{operation}{query}", status, body,
                  raw=raw)[1]


def exercise_elections(c, sid, bob_sid, carol_sid):
    """Campaign, proclaim, resign and the (observing) read; a leader seen as a lock."""
    name, path = "db/primary", "/v1/elections/db%2Fprimary"
    post = functools.partial(election_post, c, path)

    def read(status, query=""):
        return c.send("GET", ELECTION, path + query, status)[1]

    def leader_of(answer):
        return answer.get("fencing_token"), answer.get("leader", {}).get("value")

    expect(read(404), code="no_leader")
    first = post("campaign", 200, session_id=sid, value="10.0.0.1:5432")
    expect(first, name=name, session_id=sid, lease="session")
    t1 = first.get("fencing_token", 0)
    if leader_of(read(200)) != (t1, "10.0.0.1:5432"):
        fail(f"GET {path} does not answer the leader {first}")
    # The lock routes see the leader as an exclusive, session-bound lock carrying its value.
    _, as_lock = c.send("GET", "/v1/locks/{key}", "/v1/locks/db%2Fprimary", 200)
    expect(as_lock, mode="exclusive", lease="session", value="10.0.0.1:5432", fencing_token=t1)
    _, listed = c.send("GET", "/v1/locks", "/v1/locks?prefix=db", 200)
    if [e.get("value") for e in listed.get("locks", [])] != ["10.0.0.1:5432"]:
        fail(f"the lock list does not show the leader's value: {listed}")
    _, as_semaphore = c.send("GET", "/v1/semaphores/{name}", "/v1/semaphores/db%2Fprimary", 200)
    if [h.get("value") for h in as_semaphore.get("holders", [])] != ["10.0.0.1:5432"]:
        fail(f"the semaphore read does not show the leader's value: {as_semaphore}")
    expect(post("campaign", 409, session_id=bob_sid, value="b"), code="held")
    expect(post("campaign", 409, session_id=bob_sid, value="b", wait_ms=200), code="held")
    expect(c.send("POST", "/v1/locks/{key}/acquire", "/v1/locks/db%2Fprimary/acquire", 409,
                  {"session_id": bob_sid})[1], code="held")
    # Re-entrant: a greater token and the new value; proclaim keeps the token.
    again = post("campaign", 200, session_id=sid, value="10.0.0.2:5432")
    t2 = again.get("fencing_token", 0)
    if t2 <= t1:
        fail(f"a re-entrant campaign answered token {t2}, not greater than {t1}")
    proclaimed = post("proclaim", 200, session_id=sid, fencing_token=t2, value="10.0.0.3:5432")
    expect(proclaimed, name=name, session_id=sid, fencing_token=t2)
    if leader_of(proclaimed) != (t2, "10.0.0.3:5432"):
        fail(f"proclaim answered {proclaimed}")
    expect(post("proclaim", 409, session_id=sid, fencing_token=t1, value="late"), code="lock_lost")
    expect(post("proclaim", 404, session_id="nosuchsession", fencing_token=t2, value="v"),
           code="session_not_found")
    # Observing: a newer value answers at once; no change answers the state at wait_ms.
    started = time.monotonic()
    seen = read(200, f"?after_token={t2}&after_value=10.0.0.2:5432&wait_ms=20000")
    if leader_of(seen) != (t2, "10.0.0.3:5432") or time.monotonic() - started > 10:
        fail(f"an observer of an older value was not answered the new one at once: {seen}")
    if leader_of(read(200, f"?after_token={t2}&after_value=10.0.0.3:5432&wait_ms=100")) != (
            t2, "10.0.0.3:5432"):
        fail("an observer without a change did not answer the leader at its deadline")
    # Resign: only the leading grant.
    expect(post("resign", 409, session_id=sid, fencing_token=t1), code="lock_lost")
    expect(post("resign", 404, session_id="nosuchsession", fencing_token=t2),
           code="session_not_found")
    post("resign", 204, session_id=sid, fencing_token=t2)
    expect(post("resign", 409, session_id=sid, fencing_token=t2), code="lock_lost")
    expect(post("proclaim", 409, session_id=sid, fencing_token=t2, value="gone"), code="lock_lost")
    expect(read(404), code="no_leader")
    expect(read(404, f"?after_token={t2}&wait_ms=100"), code="no_leader")
    # An observer woken by the next leader, whose token is greater.
    woken = {}
    observer = threading.Thread(target=lambda: woken.update(
        answer=read(200, f"?after_token={t2}&wait_ms=20000")))
    observer.start()
    time.sleep(0.2)
    next_leader = post("campaign", 200, session_id=bob_sid, value="10.0.0.4:5432")
    observer.join(timeout=30)
    t3 = next_leader.get("fencing_token", 0)
    if t3 <= t2 or leader_of(woken.get("answer", {})) != (t3, "10.0.0.4:5432"):
        fail(f"the observer saw {woken.get('answer')}, not the next leader {next_leader}")
    # DELETE /v1/locks/{name} with the leader's token resigns it.
    c.send("DELETE", "/v1/locks/{key}", f"/v1/locks/db%2Fprimary?session_id={bob_sid}"
           f"&fencing_token={t3}", 204)
    expect(read(404), code="no_leader")
    # A name held by permits (carol's, exercise_semaphores) has no leader and holds off one.
    expect(c.send("GET", ELECTION, "/v1/elections/gpu%2Fpool", 404)[1], code="no_leader")
    expect(c.send("POST", ELECTION + "/campaign", "/v1/elections/gpu%2Fpool/campaign", 409,
                  {"session_id": carol_sid, "value": "c"})[1], code="held")
    bad_input(c, path, sid)


def bad_input(c, path, sid):
    """400 naming the field, 404 for an unknown session, 405 and 413."""
    post = functools.partial(election_post, c, path)
    for field, body in (("value", {}), ("value", {"value": ""}), ("value", {"value": 7}),
                        ("value", {"value": "x" * 1025}),
                        ("wait_ms", {"value": "v", "wait_ms": -1}),
                        ("lease", {"value": "v", "lease": "session"}),
                        ("session_id", {"session_id": None, "value": "v"})):
        expect(post("campaign", 400, **dict({"session_id": sid}, **body)),
               code="invalid_argument", field=field)
    expect(post("campaign", 400, "?ns=b@d", session_id=sid, value="v"), field="ns")
    expect(c.send("POST", ELECTION + "/campaign", "/v1/elections/bad%01name/campaign", 400,
                  {"session_id": sid, "value": "v"})[1], field="key")
    expect(post("campaign", 404, session_id="nosuchsession", value="v"), code="session_not_found")
    expect(post("proclaim", 400, session_id=sid, value="v"), field="fencing_token")
    expect(post("proclaim", 400, session_id=sid, fencing_token=1), field="value")
    expect(post("resign", 400, session_id=sid), field="fencing_token")
    expect(post("resign", 400, session_id=sid, fencing_token=1, value="v"), field="value")
    for query, field in (("?after_token=x", "after_token"), ("?after_value=v", "after_value"),
                         ("?after_token=1&after_value=", "after_value"),
                         ("?after_token=1&wait_ms=-1", "wait_ms"), ("?ns=b@d", "ns")):
        expect(c.send("GET", ELECTION, path + query, 400)[1], field=field)
    for operation in ("campaign", "proclaim", "resign"):
        post(operation, 413, raw=json.dumps({"session_id": sid, "pad": "x" * 70000}))
    c.send("PUT", ELECTION + "/campaign", path + "/campaign", 405, {"session_id": sid})
    c.send("DELETE", ELECTION, path, 405)


def shutdown_waiters(c, leader_sid, waiting_sid, refused_sid):
    """A waiting campaign and MAX_WAITERS waiting observers of an election `leader_sid` leads,
    for the shutdown to answer 503, and the check that, with them, waiters are capped (429)."""
    path = "/v1/elections/shutdown-election"
    led = c.send("POST", ELECTION + "/campaign", path + "/campaign", 200,
                 {"session_id": leader_sid, "value": "bob"})[1]
    unchanged = f"{path}?after_token={led.get('fencing_token')}&after_value=bob"
    waiting = [threading.Thread(target=c.send, args=(
        "POST", ELECTION + "/campaign", path + "/campaign", 503,
        {"session_id": waiting_sid, "value": "next", "wait_ms": 20000}))]
    waiting += [threading.Thread(target=c.send, args=(
        "GET", ELECTION, unchanged + "&wait_ms=20000", 503)) for _ in range(MAX_WAITERS)]

    def over_the_cap():
        # Called once dlock_waiters shows MAX_WAITERS. Observers are not in that metric: an
        # observer of 1 ms answers 200 until the waiting ones fill their cap, then 429.
        # No metric shows the observers registered: give their threads a moment first, or a
        # 1 ms observer in flight could take the last place from one of them (429, not 503).
        time.sleep(1.0)
        deadline = time.monotonic() + 10
        while c.send("GET", ELECTION, unchanged + "&wait_ms=1", (200, 429))[0] != 429:
            if time.monotonic() > deadline:
                return fail(f"no 429 with {MAX_WAITERS} observers waiting")
            time.sleep(0.05)
        c.send("POST", ELECTION + "/campaign", path + "/campaign", 429,
               {"session_id": refused_sid, "value": "late", "wait_ms": 20000})

    return over_the_cap, waiting
