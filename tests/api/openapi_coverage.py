"""check_openapi.py's bookkeeping: C3's routes parsed from docs/contracts/C3-http.md, the
(operation, status) pairs the run must exercise, and the waivers for the ones it cannot."""
import copy
import re

METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}

# A route row of C3's tables: its first cell is `METHOD /path…` or `/path` (any method).
ROUTE_CELL = re.compile(r"^`(?:(GET|POST|PUT|DELETE|PATCH) )?(/[^`?\s]*)[^`]*`( \(any method\))?$")

# The (operation, status) pairs no run exercises, each with its reason. A pair the run does
# exercise must not be listed (the check fails on a stale waiver). None today.
WAIVERS = {}
# Without etcd (DLOCK_WITH_ETCD=OFF) there is no cheap backend to stop: the embedded store shows
# an outage only after its 5 s busy timeout, one request at a time.
NO_ETCD = "503 from a backend that cannot answer, and /readyz 503: needs etcd (DLOCK_WITH_ETCD)"


def waivers_for(doc, covered, with_etcd):
    """WAIVERS, and without etcd every documented 503 the other runs did not exercise."""
    waivers = dict(WAIVERS)
    if not with_etcd:
        waivers.update({pair: NO_ETCD for pair in documented_pairs(doc) - covered
                        if pair[2] == 503})
    return waivers


def shape(path):
    """A path template with its parameters unnamed: C3 writes {sid} where the document has
    {session_id}."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def c3_routes(c3_text):
    """C3's routes as (method, path shape); a route of any method counts as a GET."""
    routes = set()
    for line in c3_text.splitlines():
        if not line.startswith("| `"):
            continue
        match = ROUTE_CELL.match(line.split("|")[1].strip())
        if match:
            routes.add(((match.group(1) or "GET").lower(), shape(match.group(2))))
    return routes


def route_differences(doc, routes):
    """Messages for every operation of the document C3 lacks and every C3 route it lacks."""
    operations = {(m, shape(p)) for p, item in doc["paths"].items() for m in item if m in METHODS}
    return ([f"document: {m} {p} is not a route of C3" for m, p in sorted(operations - routes)] +
            [f"document: C3's route {m} {p} is missing" for m, p in sorted(routes - operations)])


def documented_pairs(doc):
    return {(m, p, int(s)) for p, item in doc["paths"].items() for m, op in item.items()
            if m in METHODS for s in op.get("responses", {})}


def coverage_failures(doc, covered, waivers):
    """Messages for each documented pair neither exercised nor waived, and each stale waiver."""
    documented = documented_pairs(doc)
    messages = [f"{m} {p} {s}: documented, neither exercised nor waived"
                for m, p, s in sorted(documented - covered - set(waivers))]
    messages += [f"{m} {p} {s}: waived but exercised; drop the waiver"
                 for m, p, s in sorted(set(waivers) & covered)]
    messages += [f"{m} {p} {s}: waived but not documented; drop the waiver"
                 for m, p, s in sorted(set(waivers) - documented)]
    return messages


def self_test(doc, covered, waivers, routes):
    """Negative controls on copies of the document: a documented status nobody sends, and an
    operation C3 does not have, must each fail the check. Messages for the controls that pass."""
    messages = []
    fake = copy.deepcopy(doc)
    fake["paths"]["/healthz"]["get"]["responses"]["418"] = {"description": "teapot"}
    if not any("/healthz 418" in m for m in coverage_failures(fake, covered, waivers)):
        messages.append("self-test: a documented 418 nobody sends did not fail the coverage check")
    extra = copy.deepcopy(doc)
    extra["paths"]["/v1/teapot"] = {"get": {"responses": {"200": {"description": "tea"}}}}
    if not any("/v1/teapot" in m for m in route_differences(extra, routes)):
        messages.append("self-test: an operation C3 lacks did not fail the route check")
    fewer = copy.deepcopy(doc)
    gone = next(iter(fewer["paths"]))
    del fewer["paths"][gone]
    if not any(f"{shape(gone)} is missing" in m for m in route_differences(fewer, routes)):
        messages.append("self-test: a C3 route missing from the document did not fail")
    return messages
