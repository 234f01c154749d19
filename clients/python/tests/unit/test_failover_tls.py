"""Failover across servers, unknown outcomes, TLS and mTLS. Without a dlockd: scripted servers
and certificates made with the openssl tool at test time."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess

import pytest

import dlock
from fake_server import FakeServer


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def servers():
    made = []

    def make(tls_context=None):
        made.append(FakeServer(tls_context))
        return made[-1]

    yield make
    for server in made:
        server.close()


def test_an_unreachable_server_hands_the_call_to_the_next(servers):
    up = servers()
    up.session_routes()
    client = dlock.Client([closed_port_url(), up.url], retry_budget="2s")
    with client.session() as session:
        assert session.id == "s1"


def test_a_503_hands_the_call_to_the_next_at_once(servers):
    down, up = servers(), servers()
    down.routes["POST /v1/sessions"] = lambda body: (
        503, {"error": {"code": "unavailable", "message": "backend unavailable"}})
    up.session_routes()
    client = dlock.Client([down.url, up.url], retry_budget="2s")
    with client.session():
        pass
    assert len(down.requests) == 1
    assert client._core._current == 1  # later calls go to the server that answered


def test_a_lost_answer_to_open_session_is_an_unknown_outcome_at_once(servers):
    dropping = servers()
    dropping.routes["POST /v1/sessions"] = lambda body: (0, None)
    client = dlock.Client(dropping.url, retry_budget="3s")
    with pytest.raises(dlock.UnknownOutcome):
        client.session()
    assert len(dropping.requests) == 1, "a second session may have been opened"


def test_a_lost_answer_to_acquire_is_asked_again(servers):
    server = servers()
    server.session_routes()
    answers = iter([(0, None)])
    server.grant("/v1/locks/k", ttl_ms=10_000)
    grant = server.routes["POST /v1/locks/k/acquire"]
    server.routes["POST /v1/locks/k/acquire"] = lambda body: next(answers, None) or grant(body)
    client = dlock.Client(server.url, retry_budget="3s", backoff_initial="10ms")
    with client.session() as session:
        lock = session.acquire("k", ttl="10s", auto_extend=False)
        assert lock.token == 7  # acquire is re-entrant: the repeat is safe
        lock.release()


def test_401_and_403_are_not_retried(servers):
    server = servers()
    server.routes["POST /v1/sessions"] = lambda body: (
        401, {"error": {"code": "unauthenticated", "message": "no token"}})
    client = dlock.Client(server.url, retry_budget="3s")
    with pytest.raises(dlock.Unauthenticated):
        client.session()
    assert len(server.requests) == 1


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("no openssl tool")
    d = tmp_path_factory.mktemp("certs")

    def run(*args, **kwargs):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, **kwargs)

    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
        "-subj", "/CN=dlock test CA")
    for name, san in (("server", "IP:127.0.0.1"), ("client", "DNS:writer")):
        run("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext")
    return d


def server_context(certificates, require_client_cert=False) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates / "server.pem", certificates / "server.key")
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(certificates / "ca.pem")
    return context


def test_tls_verifies_the_server_against_the_ca_and_its_ip_address(servers, certificates):
    server = servers(server_context(certificates))
    server.session_routes()
    client = dlock.Client(server.url, ca_file=str(certificates / "ca.pem"))
    with client.session() as session:
        assert session.id == "s1"


def test_a_server_the_ca_did_not_sign_is_a_tls_error_not_an_outage(servers, certificates):
    server = servers(server_context(certificates))
    server.session_routes()
    client = dlock.Client(server.url, retry_budget="10s")  # the system's trust store
    with pytest.raises(dlock.TlsError) as error:
        client.session()
    assert "certificate verify failed" in str(error.value)
    assert "1 attempt" in str(error.value), "a configuration error was retried"


def test_mtls_presents_the_client_certificate(servers, certificates, monkeypatch):
    server = servers(server_context(certificates, require_client_cert=True))
    server.session_routes()
    without = dlock.Client(server.url, ca_file=str(certificates / "ca.pem"), retry_budget="1s")
    with pytest.raises(dlock.TlsError):  # refused: an alert under TLS 1.3, not an outage
        without.session()
    monkeypatch.setenv("DLOCK_CACERT", str(certificates / "ca.pem"))
    monkeypatch.setenv("DLOCK_CERT", str(certificates / "client.pem"))
    monkeypatch.setenv("DLOCK_KEY", str(certificates / "client.key"))
    with dlock.Client(server.url).session() as session:  # from the CLI's variables
        assert session.id == "s1"


def test_unreadable_tls_files_name_the_option(tmp_path):
    with pytest.raises(dlock.InvalidArgument) as error:
        dlock.Client("https://127.0.0.1:9", ca_file=str(tmp_path / "missing.pem"))
    assert error.value.field == "tls"
