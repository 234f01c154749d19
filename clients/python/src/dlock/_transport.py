"""One dlockd server: HTTP/1.1 keep-alive connections (http.client), TLS, and the three ways a
request can fail (never sent, maybe applied, TLS handshake refused)."""

from __future__ import annotations

import http.client
import select
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass

from .errors import Cancelled, InvalidArgument

NOT_SENT = "not_sent"  # could not connect: the request never left
MAYBE_SENT = "maybe_sent"  # lost after the request was written: the outcome is unknown
TLS_FAILED = "tls"  # handshake refused: configuration, not an outage


class TransportError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class Response:
    status: int
    body: bytes
    retry_after: float | None


def parse_server_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of ``http://host:port[/prefix]``."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgument(
            f"server: {url!r} is not an http:// or https:// URL", field="server"
        )
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


def make_tls_context(ca_file: str | None, cert_file: str | None, key_file: str | None):
    """TLS 1.2 or later, the server's chain verified (``ca_file`` or the system's trust store)
    and its name checked; ``cert_file``/``key_file`` present a client certificate (mTLS)."""
    try:
        context = ssl.create_default_context(cafile=ca_file or None)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if cert_file:
            context.load_cert_chain(cert_file, key_file or None)
    except (OSError, ssl.SSLError) as error:
        raise InvalidArgument(f"tls: cannot load the TLS files: {error}", field="tls") from None
    return context


class Transport:
    """Sends requests to one server. Thread-safe: idle connections are pooled."""

    def __init__(self, url: str, tls_context: ssl.SSLContext | None, max_idle: int = 8):
        self.url = url
        self.scheme, self.host, self.port, self.prefix = parse_server_url(url)
        self._tls = tls_context
        self._idle: list[http.client.HTTPConnection] = []
        self._max_idle = max_idle
        self._mutex = threading.Lock()

    def close(self) -> None:
        with self._mutex:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.scheme == "https":
            connection = http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=self._tls
            )
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            connection.connect()
        except ssl.SSLError as error:
            connection.close()
            raise TransportError(TLS_FAILED, f"TLS handshake with {self.url}: {error}") from None
        except OSError as error:
            connection.close()
            raise TransportError(NOT_SENT, f"cannot connect to {self.url}: {error}") from None
        return connection

    def send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
        timeout: float,
        cancel: threading.Event | None = None,
    ) -> Response:
        """One exchange, bounded by ``timeout`` seconds. A set ``cancel`` event closes the
        connection (a waiting acquire then leaves the server's queue) and raises Cancelled."""
        connection = self._pooled()
        if connection is not None:
            try:
                return self._exchange(connection, method, target, body, headers, timeout, cancel)
            except _StaleConnection:
                # The server closed the idle connection as the request was written: it was not
                # read, so it goes again on a fresh connection.
                connection.close()
        connection = self._connect(timeout)
        try:
            return self._exchange(connection, method, target, body, headers, timeout, cancel)
        except _StaleConnection as error:
            connection.close()
            # On a fresh connection a TLS error while sending is the server refusing us (our
            # certificate, under TLS 1.3): configuration, not an outage.
            raise TransportError(TLS_FAILED if error.tls else MAYBE_SENT,
                                 f"{self.url}: {error}") from None

    def _pooled(self) -> http.client.HTTPConnection | None:
        """An idle connection the server has not closed (readable while idle means EOF)."""
        while True:
            with self._mutex:
                if not self._idle:
                    return None
                connection = self._idle.pop()
            try:
                if not select.select([connection.sock], [], [], 0)[0]:
                    return connection
            except (OSError, ValueError):
                pass
            connection.close()

    def _exchange(self, connection, method, target, body, headers, timeout, cancel) -> Response:
        deadline = time.monotonic() + timeout
        all_headers = {"Host": f"{self.host}:{self.port}", **headers}
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        try:
            connection.sock.settimeout(timeout)
            connection.request(method, self.prefix + target, body=body, headers=all_headers)
        except OSError as error:
            raise _StaleConnection(f"sending: {error}", isinstance(error, ssl.SSLError)) from None
        try:
            # Wait for the first byte of the answer while watching `cancel`.
            while True:
                if cancel is not None and cancel.is_set():
                    connection.close()
                    raise Cancelled(f"{method} {target}: cancelled")
                left = deadline - time.monotonic()
                if left <= 0:
                    connection.close()
                    raise TransportError(MAYBE_SENT, f"{self.url}: no answer within {timeout:g} s")
                pending = isinstance(connection.sock, ssl.SSLSocket) and connection.sock.pending()
                if pending or select.select([connection.sock], [], [], min(left, 0.05))[0]:
                    break
            connection.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            response = connection.getresponse()
            data = response.read()
        except ssl.SSLError as error:
            # Under TLS 1.3 a refused client certificate arrives as an alert instead of the
            # answer: configuration, not an outage.
            connection.close()
            raise TransportError(TLS_FAILED, f"TLS with {self.url}: {error}") from None
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            reason = str(error) or type(error).__name__
            raise TransportError(MAYBE_SENT, f"{self.url}: {reason}") from None
        retry_after = None
        if (value := response.getheader("Retry-After")) and value.strip().isdigit():
            retry_after = float(value.strip())
        if response.will_close:
            connection.close()
        else:
            with self._mutex:
                if len(self._idle) < self._max_idle:
                    self._idle.append(connection)
                    connection = None
            if connection is not None:
                connection.close()
        return Response(response.status, data, retry_after)


class _StaleConnection(Exception):
    """Sending failed: on a pooled connection, most likely one the server had closed."""

    def __init__(self, message: str, tls: bool = False):
        super().__init__(message)
        self.tls = tls

