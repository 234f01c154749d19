"""A scripted dlockd for the unit tests: answers each route with what the test says."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeServer:
    """``routes`` maps "METHOD /path" (no query) to a function(body) -> (status, dict|None);
    status 0 drops the connection without an answer. With ``tls_context``: HTTPS."""

    def __init__(self, tls_context=None):
        self.routes: dict[str, object] = {}
        self.requests: list[tuple[str, str, dict | None]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                path = self.path.split("?", 1)[0]
                fake.requests.append((self.command, self.path, body))
                route = fake.routes.get(f"{self.command} {path}")
                status, answer = route(body) if route else (404, {"error": {"code": "not_found"}})
                if status == 0:  # drop the connection without an answer
                    self.close_connection = True
                    return
                data = json.dumps(answer).encode() if answer is not None else b""
                self.send_response(status)
                if status in (429, 503):
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that went away (a cancelled wait) is part of the tests

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        scheme = "http"
        if tls_context is not None:
            scheme = "https"
            self._server.socket = tls_context.wrap_socket(self._server.socket, server_side=True)
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()

    def session_routes(self, ttl_ms: int = 30000, keepalive_status: int = 200):
        self.routes["POST /v1/sessions"] = lambda body: (
            201, {"session_id": "s1", "owner": body["owner"], "ttl_ms": ttl_ms, "lock_delay_ms": 0,
                  "expires_at": "2026-12-06T00:00:00.000Z"})
        self.routes["POST /v1/sessions/s1/keepalive"] = lambda body: (
            (200, {"ttl_ms": ttl_ms, "expires_at": "2026-12-06T00:00:00.000Z"})
            if keepalive_status == 200
            else (keepalive_status, {"error": {"code": "session_not_found", "message": "gone"}}))
        self.routes["DELETE /v1/sessions/s1"] = lambda body: (204, None)

    def grant(self, key_path: str, ttl_ms: int, token: int = 7):
        self.routes[f"POST {key_path}/acquire"] = lambda body: (
            200, {"key": "k", "fencing_token": token, "owner": "o", "session_id": "s1",
                  "ttl_ms": ttl_ms, "expires_at": "2026-12-06T00:00:00.000Z", "lease": "ttl",
                  "mode": "exclusive"})
        self.routes[f"DELETE {key_path}"] = lambda body: (204, None)
