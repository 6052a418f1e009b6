"""A real HTTP server on 127.0.0.1 standing in for the admin app, for the command line's tests: it records
every POST, and answers the status routes with a recorded status (admin_status.json beside this file)
when the bearer token is `ADMIN_TOKEN` (401 otherwise)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

ADMIN_TOKEN = "admin-token-for-the-test"
RECORDED_STATUS: dict[str, Any] = json.loads((Path(__file__).parent / "admin_status.json").read_text("utf-8"))


class AdminStub(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.path, self.headers.get("Authorization", ""), body))
        self._reply(200, {"pushed": True})

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {ADMIN_TOKEN}":
            self._reply(401, None)
            return
        self._reply(200, RECORDED_STATUS[self.path.removeprefix("/admin/")])

    def _reply(self, status: int, answer: Any) -> None:
        reply = json.dumps(answer).encode() if answer is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: no request lines on stderr
        pass


@contextlib.contextmanager
def serve_admin_stub() -> Iterator[str]:
    """The stub's base URL (the Serve address: the admin API is under /admin), until the block ends."""
    AdminStub.received = []
    server = HTTPServer(("127.0.0.1", 0), AdminStub)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
