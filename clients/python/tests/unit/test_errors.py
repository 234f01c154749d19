"""Every C3 error code to its typed error, and 503 never "held". Without a dlockd."""

from __future__ import annotations

import json

import pytest

import dlock
from dlock.errors import error_from_response
from fake_server import FakeServer


def body(code: str, field: str | None = None) -> bytes:
    error = {"code": code, "message": f"the server says {code}"}
    if field:
        error["field"] = field
    return json.dumps({"error": error}).encode()


@pytest.mark.parametrize("status,code,kind", [
    (400, "invalid_argument", dlock.InvalidArgument),
    (413, "payload_too_large", dlock.InvalidArgument),
    (401, "unauthorized", dlock.Unauthenticated),
    (401, "unauthenticated", dlock.Unauthenticated),
    (403, "forbidden", dlock.PermissionDenied),
    (403, "permission_denied", dlock.PermissionDenied),
    (404, "session_not_found", dlock.SessionNotFound),
    (404, "lock_not_found", dlock.LockLost),
    (404, "not_found", dlock.InvalidArgument),
    (405, "method_not_allowed", dlock.InvalidArgument),
    (409, "held", dlock.Held),
    (409, "lock_lost", dlock.LockLost),
    (409, "conflict", dlock.Conflict),
    (429, "too_many_requests", dlock.ResourceExhausted),
    (500, "internal", dlock.Internal),
    (503, "unavailable", dlock.Unavailable),
    (503, "not_leader", dlock.NotLeader),
])
def test_every_c3_code_maps_to_its_typed_error(status, code, kind):
    error = error_from_response(status, body(code), "acquire k", "k")
    assert type(error) is kind
    if code != "held":
        assert "the server says" in str(error)


@pytest.mark.parametrize("status", [502, 503, 504])
def test_an_outage_is_unavailable_never_held(status):
    for payload in (body("unavailable"), b"", b"<html>bad gateway</html>"):
        error = error_from_response(status, payload, "acquire k", "k")
        assert isinstance(error, dlock.Unavailable)
        assert not isinstance(error, dlock.Held)


def test_errors_without_a_body_map_by_status():
    assert type(error_from_response(401, b"", "x")) is dlock.Unauthenticated
    assert type(error_from_response(403, b"", "x")) is dlock.PermissionDenied
    assert type(error_from_response(418, b"", "x")) is dlock.InvalidArgument
    assert type(error_from_response(500, b"oops", "x")) is dlock.Internal


def test_conflict_and_invalid_argument_name_the_field():
    assert error_from_response(409, body("conflict", "limit"), "x").field == "limit"
    assert error_from_response(400, body("invalid_argument", "ttl_ms"), "x").field == "ttl_ms"


def test_held_names_the_key_and_no_holder():
    error = dlock.Held("payouts/batch-17", 5)
    assert "payouts/batch-17" in str(error) and "5 s" in str(error)


def test_a_backend_outage_on_acquire_is_unavailable_in_every_form():
    server = FakeServer()
    try:
        server.session_routes()
        server.routes["POST /v1/locks/k/acquire"] = lambda b: (
            503, {"error": {"code": "unavailable", "message": "backend unavailable"}})
        client = dlock.Client(server.url, retry_budget="300ms", backoff_initial="10ms")
        with client.session() as session:
            with pytest.raises(dlock.Unavailable):
                session.acquire("k")
            with pytest.raises(dlock.Unavailable):
                session.acquire("k", wait="200ms")
            with pytest.raises(dlock.Unavailable):
                with session.lock("k"):
                    pass
        attempts = [r for r in server.requests if r[1].startswith("/v1/locks/k/acquire")]
        assert len(attempts) >= 3, "503 was not retried"
    finally:
        server.close()


def test_held_is_a_value_and_the_with_form_raises_held():
    server = FakeServer()
    try:
        server.session_routes()
        server.routes["POST /v1/locks/k/acquire"] = lambda b: (
            409, {"error": {"code": "held", "message": "lock k is held by another session"}})
        client = dlock.Client(server.url)
        with client.session() as session:
            assert session.acquire("k") is None
            with pytest.raises(dlock.Held):
                with session.lock("k"):
                    pass
    finally:
        server.close()


def test_tokens_come_from_the_cli_variables_and_are_never_echoed(monkeypatch, tmp_path):
    monkeypatch.setenv("DLOCK_TOKEN", "dlk_fromtheenvironment")
    assert dlock.Client("http://127.0.0.1:9")._core.token == "dlk_fromtheenvironment"
    path = tmp_path / "token"
    path.write_text("dlk_fromafile  \n")
    monkeypatch.delenv("DLOCK_TOKEN")
    monkeypatch.setenv("DLOCK_TOKEN_FILE", str(path))
    assert dlock.Client("http://127.0.0.1:9")._core.token == "dlk_fromafile"
    monkeypatch.setenv("DLOCK_TOKEN", "not a token")
    with pytest.raises(dlock.InvalidArgument) as error:
        dlock.Client("http://127.0.0.1:9")
    assert error.value.field == "DLOCK_TOKEN" and "not a token" not in str(error.value)
    monkeypatch.setenv("DLOCK_SERVER", "http://a:7070,http://b:7070")
    assert dlock.Client(token="dlk_x").servers == ["http://a:7070", "http://b:7070"]


@pytest.mark.parametrize("text,ms", [("500ms", 500), ("10s", 10_000), ("5m", 300_000),
                                     ("1h", 3_600_000), (1.5, 1_500), (None, 0)])
def test_durations(text, ms):
    assert dlock.duration_ms(text) == ms


def test_a_bad_duration_names_its_field():
    with pytest.raises(dlock.InvalidArgument) as error:
        dlock.duration_ms("ten seconds", "ttl")
    assert error.value.field == "ttl"


def test_leaving_the_block_after_the_lock_was_lost_raises_lock_lost():
    server = FakeServer()
    try:
        server.session_routes()
        server.grant("/v1/locks/k", ttl_ms=3_000)
        server.routes["POST /v1/locks/k/extend"] = lambda b: (
            409, {"error": {"code": "lock_lost", "message": "not the live grant"}})
        client = dlock.Client(server.url)
        with pytest.raises(dlock.LockLost):
            with client.lock("k", ttl="3s") as lock:
                assert lock.lost.wait(3), "the extend's lock_lost did not mark the lock lost"
        assert "lock lost" in lock.lost_reason
    finally:
        server.close()


def test_held_by_a_lock_delay_says_so_and_an_admin_clears_it():
    server = FakeServer()
    try:
        server.session_routes()
        server.routes["POST /v1/locks/k/acquire"] = lambda b: (
            409, {"error": {"code": "held", "message": "lock k: lock-delay until …",
                            "delayed_until": "2026-12-06T10:00:00.000Z"}})
        server.routes["POST /v1/admin/locks/k/clear-delay"] = lambda b: (200, {"cleared": True})
        server.routes["GET /v1/locks"] = lambda b: (200, {"locks": [], "delays": [
            {"key": "k", "delayed_until": "2026-12-06T10:00:00.000Z"}]})
        client = dlock.Client(server.url, admin_token="dlk_admin")
        with client.session() as session:
            assert session.acquire("k") is None
            with pytest.raises(dlock.Held) as error:
                session.acquire_or_raise("k")
            assert error.value.delayed_until == "2026-12-06T10:00:00.000Z"
            assert "lock-delay" in str(error.value) and "session" not in str(error.value)
        assert client.delays() == [dlock.KeyDelay("k", "2026-12-06T10:00:00.000Z")]
        assert client.clear_delay("k") is True
    finally:
        server.close()
