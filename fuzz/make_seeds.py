#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (docs/fuzzing.md). Idempotent: rerun it
after changing a seed here; the files it writes are committed. Requests follow the e2e tests
(tests/integration/server_e2e_test.cc); "@SID@" is replaced by the http_request target with the
ID of a session it opened."""
import hashlib
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    with open(os.path.join(folder, name), "wb") as out:
        out.write(data)


def request(method, target, body=None, headers=()):
    lines = [f"{method} {target} HTTP/1.1", "Host: dlockd"]
    lines += list(headers)
    if body is not None:
        lines += ["Content-Type: application/json", "Content-Length: %d" % len(body.encode("utf-8", "surrogateescape"))]
    return "\r\n".join(lines) + "\r\n\r\n" + (body or "")


def acquire(key, extra="", ns_query=""):
    return request("POST", f"/v1/locks/{key}/acquire{ns_query}",
                   '{"session_id":"@SID@","ttl_ms":30000,"wait_ms":0' + extra + "}")


# --- (a) http_request -----------------------------------------------------------------------
http = {
    "healthz": request("GET", "/healthz"),
    "readyz_metrics": request("GET", "/readyz") + request("GET", "/metrics"),
    "open_session": request("POST", "/v1/sessions", '{"owner":"alice","ttl_ms":60000}'),
    "open_session_no_ttl": request("POST", "/v1/sessions", '{"owner":"alice"}'),
    "open_session_lock_delay": request("POST", "/v1/sessions",
                                       '{"owner":"alice","ttl_ms":10000,"lock_delay_ms":1500}')
    + request("POST", "/v1/sessions", '{"owner":"a","lock_delay_ms":-1}')
    + request("POST", "/v1/sessions", '{"owner":"a","lock_delay_ms":1e12}'),
    "keepalive_close": request("POST", "/v1/sessions/@SID@/keepalive")
    + request("DELETE", "/v1/sessions/@SID@"),
    "acquire": acquire("orders-17"),
    "lifecycle": acquire("payouts%2Fbatch-17")
    + request("POST", "/v1/locks/payouts%2Fbatch-17/extend",
              '{"session_id":"@SID@","fencing_token":1,"ttl_ms":20000}')
    + request("GET", "/v1/locks/payouts%2Fbatch-17")
    + request("GET", "/v1/locks?prefix=payouts&limit=10")
    + request("DELETE", "/v1/locks/payouts%2Fbatch-17?session_id=@SID@&fencing_token=1"),
    "acquire_ns_body": acquire("k", ',"ns":"team-a.prod_1"'),
    "acquire_ns_query": acquire("k", "", "?ns=team-a"),
    "acquire_wait_held": acquire("k") + acquire("k", ',"wait_ms":5'),
    "acquire_chunked": "POST /v1/locks/chunked/acquire HTTP/1.1\r\nHost: d\r\n"
    "Transfer-Encoding: chunked\r\n\r\n10\r\n{\"session_id\":\"@\r\n"
    "6\r\nSID@\"}\r\n0\r\n\r\n",
    "chunked_extension_trailer": "POST /v1/sessions HTTP/1.1\r\nHost: d\r\n"
    "Transfer-Encoding: chunked\r\n\r\n11;ext=1\r\n{\"owner\":\"alice\"}\r\n0\r\nX-T: 1\r\n\r\n",
    "transfer_encoding_gzip": "POST /v1/sessions HTTP/1.1\r\nHost: d\r\n"
    "Transfer-Encoding: gzip\r\n\r\n{\"owner\":\"a\"}",
    "expect_continue": request("POST", "/v1/sessions", '{"owner":"a"}', ["Expect: 100-continue"]),
    "head": request("HEAD", "/healthz"),
    "connection_close": request("GET", "/healthz", None, ["Connection: close"])
    + request("GET", "/healthz"),
    "http10": "GET /healthz HTTP/1.0\r\n\r\n",
    "key_ff": request("GET", "/v1/locks/%FF"),
    "key_overlong_slash": request("GET", "/v1/locks/a%C0%AFb"),
    "key_surrogate": acquire("x%ED%A0%80"),
    "key_above_max": acquire("%F4%90%80%80"),
    "key_truncated": request("DELETE", "/v1/locks/%E2%82?session_id=@SID@&fencing_token=1"),
    "key_utf8_ok": acquire("caf%C3%A9-%E2%82%AC-%F0%9F%94%92") + request("GET", "/v1/locks"),
    "ns_ff": request("GET", "/v1/locks/k?ns=%FF"),
    "prefix_overlong": request("GET", "/v1/locks?prefix=%C0%AF"),
    "not_found_ff": request("GET", "/v1/%FF/x"),
    "method_not_allowed_ff": request("PUT", "/v1/locks/k/%FF"),
    "key_control": request("GET", "/v1/locks/bad%01key"),
    "bad_percent": request("GET", "/v1/locks/bad%zzkey"),
    "plus_in_query": request("GET", "/v1/locks?prefix=a+b&ns=default"),
    "huge_numbers": acquire("k", ',"ttl_ms":99999999999999999999999'),
    "huge_double": acquire("k", ',"ttl_ms":1e400'),
    "negative_wait": acquire("k", ',"wait_ms":-1'),
    "fractional_ttl": acquire("k", ',"ttl_ms":1500.5'),
    "duplicate_keys": request("POST", "/v1/sessions", '{"owner":"a","owner":"b"}'),
    "unknown_field": request("POST", "/v1/sessions", '{"owner":"a","colour":"red"}'),
    "token_huge": request("DELETE", "/v1/locks/k?session_id=@SID@&fencing_token=18446744073709551616"),
    "token_negative": request("POST", "/v1/locks/k/extend", '{"session_id":"@SID@","fencing_token":-3}'),
    "limit_bad": request("GET", "/v1/locks?limit=0") + request("GET", "/v1/locks?limit=lots"),
    # Cursor paging (C3 "Paging"): a page's `next` passed back, and cursors that are none.
    "list_pages": acquire("p%2Fa") + acquire("p%2Fb")
    + request("GET", "/v1/locks?prefix=p%2F&limit=1")
    + request("GET", "/v1/locks?prefix=p%2F&limit=1&after=1%3Ap%2Fa")
    + request("GET", "/v1/locks?after=0%3Ap%2Fa&ns=default")
    + request("GET", "/v1/sessions?limit=1&after=@SID@"),
    "list_after_bad": request("GET", "/v1/locks?after=zz")
    + request("GET", "/v1/locks?after=1%3A")
    + request("GET", "/v1/locks?after=%3Ak")
    + request("GET", "/v1/locks?after=18446744073709551616%3Ak")
    + request("GET", "/v1/locks?after=1%3A%FF")
    + request("GET", "/v1/locks?after=1%3Abad%01key")
    + request("GET", "/v1/sessions?after=bad!id"),
    "revoke": acquire("r") + request("POST", "/v1/admin/locks/r/revoke", None,
                                     ["Authorization: Bearer fuzz-admin"]),
    "revoke_wrong_token": request("POST", "/v1/admin/locks/r/revoke", None,
                                  ["Authorization: Bearer nope"]),
    "revoke_no_token": request("POST", "/v1/admin/locks/r/revoke"),
    "put_405": request("PUT", "/v1/locks/k/acquire"),
    "route_404": request("GET", "/v1/nothing-here"),
    "body_too_large": request("POST", "/v1/sessions", '{"owner":"' + "a" * 5000 + '"}'),
    "body_not_object": request("POST", "/v1/sessions", "[1,2]"),
    "body_bad_json": request("POST", "/v1/sessions", "{not json"),
    "body_bad_utf8": request("POST", "/v1/sessions", '{"owner":"\udcff"}'),
    "owner_lone_surrogate_escape": request("POST", "/v1/sessions", '{"owner":"\\udc00"}'),
    "double_content_length": "POST /v1/sessions HTTP/1.1\r\nContent-Length: 2\r\n"
    "Content-Length: 3\r\n\r\n{}",
    "absolute_target": request("GET", "http://dlockd/healthz"),
    "asterisk_target": request("OPTIONS", "*"),
    "empty_segments": request("GET", "//v1//locks//"),
    "dot_segments": request("GET", "/v1/locks/../locks/%2e%2e"),
    # Holder sets (ADR-0020): shared locks and semaphores.
    "shared_then_exclusive": acquire("rw", ',"mode":"shared"') + acquire("rw", ',"mode":"shared"')
    + acquire("rw", ',"mode":"exclusive"') + request("GET", "/v1/locks/rw"),
    "mode_bad": acquire("k", ',"mode":"permit"') + acquire("k", ',"mode":7'),
    "semaphore": request("POST", "/v1/semaphores/pool/acquire",
                         '{"session_id":"@SID@","limit":2,"ttl_ms":30000}')
    + request("POST", "/v1/semaphores/pool/acquire", '{"session_id":"@SID@","limit":3}')
    + request("GET", "/v1/semaphores/pool")
    + request("POST", "/v1/semaphores/pool/extend",
              '{"session_id":"@SID@","fencing_token":1,"ttl_ms":20000}')
    + request("DELETE", "/v1/semaphores/pool?session_id=@SID@&fencing_token=1"),
    "semaphore_limit_bad": request("POST", "/v1/semaphores/p/acquire",
                                   '{"session_id":"@SID@","limit":0}')
    + request("POST", "/v1/semaphores/p/acquire", '{"session_id":"@SID@","limit":1e9}')
    + request("POST", "/v1/semaphores/p/acquire", '{"session_id":"@SID@"}'),
    "semaphore_405": request("PUT", "/v1/semaphores/p/acquire"),
    # Elections (ADR-0020): campaign, proclaim, observe, resign.
    "election": request("POST", "/v1/elections/e/campaign",
                        '{"session_id":"@SID@","value":"10.0.0.1:8080"}')
    + request("POST", "/v1/elections/e/proclaim",
              '{"session_id":"@SID@","fencing_token":1,"value":"10.0.0.2"}')
    + request("GET", "/v1/elections/e?after_token=1&after_value=10.0.0.2&wait_ms=3")
    + request("POST", "/v1/elections/e/resign", '{"session_id":"@SID@","fencing_token":1}')
    + request("GET", "/v1/elections/e"),
    "election_bad": request("POST", "/v1/elections/e/campaign", '{"session_id":"@SID@","value":""}')
    + request("POST", "/v1/elections/e/campaign", '{"session_id":"@SID@","value":"a\\u0000b"}')
    + request("GET", "/v1/elections/e?after_token=-1")
    + request("GET", "/v1/elections/e?after_value=%ff&after_token=0")
    + request("GET", "/v1/elections/e?after_token=0&wait_ms=1e3")
    + request("PUT", "/v1/elections/e/campaign"),
    # The watch (C3 "Watch"): its query parameters, after a grant and a release.
    "watch": request("GET", "/v1/watch?prefix=")
    + acquire("jobs%2Fa")
    + request("DELETE", "/v1/locks/jobs%2Fa?session_id=@SID@&fencing_token=1")
    + request("GET", "/v1/watch?prefix=jobs%2F&ns=default&limit=1")
    + request("GET", "/v1/watch?key=jobs%2Fa&after=0123456789abcdef.0&wait_ms=3&limit=1000")
    + request("GET", "/v1/watch?key=jobs%2Fa&after=&wait_ms=0"),
    "watch_bad": request("GET", "/v1/watch")
    + request("GET", "/v1/watch?key=a&prefix=b")
    + request("GET", "/v1/watch?key=&after=..")
    + request("GET", "/v1/watch?key=a&after=ABC")
    + request("GET", "/v1/watch?key=a&after=0123456789abcdef.99999999999999999999999")
    + request("GET", "/v1/watch?prefix=%ff&wait_ms=1e3&limit=-1")
    + request("GET", "/v1/watch?key=a%00b&ns=x%2Fy"),
}
for name, data in http.items():
    write("http_request", name, data)

# --- (b) json_body --------------------------------------------------------------------------
bodies = {
    "empty": "",
    "whitespace": " \t\r\n",
    "acquire": '{"session_id":"7f3a","ttl_ms":30000,"wait_ms":1000,"ns":"team-a"}',
    "extend": '{"session_id":"7f3a","fencing_token":18446744073709551615,"ttl_ms":20000}',
    "open": '{"owner":"alice","ttl_ms":60000}',
    "nulls": '{"owner":null,"ttl_ms":null}',
    "duplicate": '{"session_id":"a","session_id":"b"}',
    "duplicate_nested_escape": '{"ns":"a","n\\u0073":"b"}',
    "huge_int": '{"ttl_ms":99999999999999999999999999}',
    "huge_double": '{"ttl_ms":1e400}',
    "neg_zero": '{"ttl_ms":-0.0,"wait_ms":-0}',
    "int64_edges": '{"ttl_ms":-9223372036854775808,"wait_ms":9223372036854775807}',
    "double_edge": '{"ttl_ms":9.0e18,"wait_ms":-9.0e18}',
    "fraction": '{"ttl_ms":1.5}',
    "token_negative": '{"fencing_token":-1}',
    "token_double": '{"fencing_token":1e19}',
    "wrong_types": '{"owner":7,"ttl_ms":"5s","session_id":[],"fencing_token":{}}',
    "unknown": '{"colour":"red"}',
    "array": "[1,2]",
    "string": '"x"',
    "truncated": '{"owner":"al',
    "bad_utf8": b'{"owner":"\xff\xc0\xaf"}',
    "escapes": '{"owner":"\\u00e9\\ud83d\\udd12\\n\\t"}',
    "lone_surrogate": '{"owner":"\\ud800"}',
    "deep": "[" * 200 + "]" * 200,
    "comment": '{"owner":"a"} // x',
    "trailing": '{"owner":"a"} {}',
    "shared": '{"session_id":"7f3a","mode":"shared","lease":"session"}',
    "permit": '{"session_id":"7f3a","limit":1024,"ttl_ms":30000}',
    "mode_wrong": '{"mode":"permit","limit":-1}',
    "limit_edges": '{"limit":4294967297}',
    "campaign": '{"session_id":"7f3a","value":"10.0.0.1:8080","wait_ms":1000}',
    "value_nul": '{"value":"a\\u0000b"}',
    "value_wrong": '{"value":["x"]}',
    "lock_delay": '{"owner":"alice","ttl_ms":10000,"lock_delay_ms":15000}',
    "lock_delay_edges": '{"lock_delay_ms":-1,"ttl_ms":60001}',
    "lock_delay_wrong": '{"lock_delay_ms":"15s"}',
}
for name, data in bodies.items():
    write("json_body", name, data)

# --- (c) config: the file's text, then NUL-separated arguments -------------------------------
configs = {
    "file": "# dlockd\nlock.backend = sqlite\nserver.listen = 127.0.0.1:0\n"
    "lock.default.ttl = 30s\nlock.max.ttl = 1h\nserver.max.body = 65536\n",
    "file_crlf_comments": "  # c\r\n\r\nlog.level=debug\r\nadmin.enabled = yes\r\nadmin.token = t\r\n",
    "no_equals": "lock.backend\n",
    "unknown_key": "colour = red\n",
    "bad_values": "server.workers = 0\nlock.max.wait = 5x\n",
    "pg_without_url": "lock.backend = pg\n",
    "admin_without_token": "admin.enabled = true\n",
    "huge_duration": "lock.default.ttl = 9223372036854775807h\n",
    "flags": "\0--lock-backend\0etcd\0--etcd-endpoints=http://127.0.0.1:2379\0--server-workers\x004",
    "flag_missing_value": "\0--server-listen",
    "unknown_flag": "\0--colour\0red",
    "help": "\0--help",
    "raise_revision": "\0--etcd-raise-revision-to\x00123456",
    "raise_revision_eq": "\0--etcd-raise-revision-to=9223372036854775807",
    "raise_revision_bad": "\0--etcd-raise-revision-to=-1",
    "config_flag_twice": "log.level = warn\n\0--config\0/nonexistent",
    "ttl_out_of_limits": "lock.max.ttl = 10s\nlock.default.ttl = 30s\n",
    "equals_in_value": "admin.token = a=b=c\nadmin.enabled = 1\n",
}
for name, data in configs.items():
    write("config", name, data)

# --- (d) tokens_file ------------------------------------------------------------------------
def sha(token):
    return hashlib.sha256(token.encode()).hexdigest()

tokens = {
    "valid": "# dlockd tokens\n\n   \nalice " + sha("dlk_a") + " lock:payments,read:*\n"
    "\t# indented\nbob\t" + sha("dlk_b") + "\tread:pay*\r\ngate - admin:*\n",
    "upper_hex": "alice " + sha("dlk_a").upper() + " read:*\n",
    "one_field": "alice\n",
    "short_hash": "alice deadbeef read:*\n",
    "duplicate_name": "a - read:*\na - lock:x\n",
    "duplicate_hash": "a " + sha("t") + " read:*\nb " + sha("t") + " read:*\n",
    "bad_role": "a - write:*\n",
    "bad_pattern": "a - read:\n",
    "many_permissions": "a - " + ",".join(f"read:p{i}*" for i in range(50)) + "\n",
    "bad_name": "a/b - read:*\n",
    "utf8_name": "caf\u00e9 - read:*\n",
    "no_newline_at_end": "a - read:*",
    "nul": b"a\x00 - read:*\n",
}
for name, data in tokens.items():
    write("tokens_file", name, data)

# --- (e) client_response: a selector byte (decoder, status), then the body -----------------
session = '{"session_id":"7f3a","owner":"alice","ttl_ms":30000,"expires_at":"2026-11-30T01:02:03.456Z"}'
info = ('{"key":"k","fencing_token":18446744073709551615,"owner":"a","session_id":"s",'
        '"acquired_at":"2026-11-30T01:02:03Z","expires_at":"2026-11-30T01:02:03.456+02:00"}')
responses = {
    "session": bytes([0]) + session.encode(),
    # Lock-delay (C3 POST /v1/sessions): granted, and of the wrong sign or type.
    "session_lock_delay": bytes([0]) + session.replace('"ttl_ms":30000', '"ttl_ms":30000,"lock_delay_ms":15000').encode(),
    "session_lock_delay_bad": bytes([0]) + b'{"session_id":"7f3a","ttl_ms":1,"lock_delay_ms":-1}',
    "session_lock_delay_huge": bytes([0]) + b'{"session_id":"7f3a","ttl_ms":1,"lock_delay_ms":1e300}',
    "lock_info": bytes([1]) + info.encode(),
    "list": bytes([2]) + ('{"locks":[' + info + "," + info + "]}").encode(),
    "list_not_objects": bytes([2]) + b'{"locks":[1,"x",null]}',
    "list_page": bytes([2]) + ('{"locks":[' + info + '],"delays":[{"key":"d","delayed_until":'
                               '"2026-11-30T01:02:03.456Z"}],"next":"0:d"}').encode(),
    "list_page_bad": bytes([2]) + b'{"locks":[],"delays":[1,{"key":7},{"delayed_until":"x"}],"next":5}',
    "revoke": bytes([3]) + b'{"revoked":true,"fencing_token":7,"owner":"a"}',
    "revoke_false": bytes([3]) + b'{"revoked":false}',
    "grant": bytes([4]) + b'{"fencing_token":1,"ttl_ms":30000,"expires_at":"2026-11-30T01:02:03.456Z"}',
    "grant_negative": bytes([4]) + b'{"fencing_token":-1,"ttl_ms":-5}',
    "grant_huge_ttl": bytes([4]) + b'{"fencing_token":1,"ttl_ms":18446744073709551615}',
    "time_leap": bytes([5]) + b"2016-12-31T23:59:60Z",
    "time_long_fraction": bytes([5]) + b"2026-11-30T01:02:03.123456789012345678901234Z",
    "time_offset": bytes([5]) + b"0000-01-01T00:00:00-23:59",
    "time_far": bytes([5]) + b"9999-12-31T23:59:59.999+99:99",
    "time_bad_date": bytes([5]) + b"2026-02-30T01:02:03Z",
    "error_400": bytes([6 * 3 + 0]) + b'{"error":{"code":"invalid_argument","message":"m","field":"ttl_ms"}}',
    "error_409_held": bytes([6 * 8 + 0]) + b'{"error":{"code":"held","message":"held"}}',
    "error_html": bytes([6 * 12 + 0]) + b"<html>bad gateway</html>",
    "error_429": bytes([6 * 10 + 0]) + b'{"error":{"code":"too_many_requests","message":"full"}}',
    "error_wrong_types": bytes([6 * 4 + 0]) + b'{"error":{"code":7,"message":[],"field":null}}',
    "not_json": bytes([1]) + b"\xff\xfe",
    "duplicate_keys": bytes([1]) + b'{"key":"a","key":"b","fencing_token":1}',
}
for name, data in responses.items():
    write("client_response", name, data)

# --- (g) cli_values: a selector byte (0 duration, 1 drift, 2/3 raise-revision), then text ----
values = {
    "duration_ms": b"\x00500ms", "duration_s": b"\x0030s", "duration_m": b"\x005m",
    "duration_h": b"\x001h", "duration_zero": b"\x000", "duration_bare": b"\x0017",
    "duration_huge": b"\x009223372036854775807h", "duration_overflow": b"\x0099999999999999999999s",
    "duration_neg": b"\x00-5s", "duration_unit": b"\x005d",
    "drift": b"\x010.01", "drift_percent": b"\x011%", "drift_nan": b"\x01nan",
    "drift_inf": b"\x01inf%", "drift_half": b"\x010.5", "drift_exp": b"\x011e-3",
    "drift_hex": b"\x010x1p-4",
    "revision": b"\x02123456", "revision_max": b"\x029223372036854775807",
    "revision_over": b"\x029223372036854775808", "revision_zero": b"\x030",
    "revision_neg": b"\x03-7", "revision_plus": b"\x03+7", "revision_space": b"\x03 7",
}
for name, data in values.items():
    write("cli_values", name, data)

# --- (f) etcd_record: a serialized mvccpb::KeyValue ------------------------------------------
def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def field(number, value):
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint((number << 3) | 2) + varint(len(value)) + value

def grant(owner, session, acquired, expiry):
    return field(1, owner) + field(2, session) + field(3, acquired) + field(4, expiry)

def kv(key, value, mod_revision=42):
    return field(1, key) + field(2, 40) + field(3, mod_revision) + field(4, 1) + field(5, value) + field(6, 7)

sid = "0123456789abcdef0123456789abcdef"
records = {
    "grant": kv("/dlock/default/lock/orders/17", grant("alice", sid, 1764550000000000, 1764550030000000)),
    "grant_extreme_times": kv("/dlock/a/lock/k", grant("a", sid, -(1 << 63), (1 << 63) - 1)),
    "grant_big_times": kv("/dlock/a/lock/k", grant("a", sid, 9300000000000000000, 1)),
    "grant_negative_revision": kv("/dlock/a/lock/k", grant("a", sid, 1, 2), -5),
    "session_record": kv("/dlock/_sessions/" + sid, field(1, "alice") + field(2, 30000) + field(3, 7)),
    "session_index": kv("/dlock/_sessions/" + sid + "/locks/default/k", b""),
    "not_a_lock_key": kv("/elsewhere/x", grant("a", sid, 1, 2)),
    "ns_with_lock_segment": kv("/dlock/a/lock/b/lock/c", grant("a", sid, 1, 2)),
    "empty_name": kv("/dlock/a/lock/", b""),
    "garbage_value": kv("/dlock/a/lock/k", b"\xff\xff\xff\xff"),
    "wrong_wire_type": kv("/dlock/a/lock/k", varint((1 << 3) | 0) + varint(5)),
    "key_ff": kv("/dlock/a/lock/\xff", b""),
    "raw_bytes": b"not a protobuf \xff",
}
for name, data in records.items():
    write("etcd_record", name, data)
