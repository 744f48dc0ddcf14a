"""An HTTP proxy in front of a real S3 server that misbehaves on request.

Modes, switched while it runs:
- `forward`: pass every request through;
- `hang`: accept connections and never answer;
- `drop-conditional-put`: forward a PUT carrying If-Match or If-None-Match on a key that
  ends with `drop_suffix`, let the server apply it, then close the connection without an
  answer (a lost response), once per arming;
- `reset`: close every connection at once.
"""

from __future__ import annotations

import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.mode = "forward"
        self.drop_suffix = ""
        self.dropped = 0
        self.conditional_puts = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                if proxy.mode == "hang":
                    threading.Event().wait(600)
                    return
                if proxy.mode == "reset":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = dict(self.headers.items())  # Host too: it is signed
                upstream = http.client.HTTPConnection(*proxy.upstream, timeout=30)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    payload = response.read()
                finally:
                    upstream.close()
                conditional = self.command == "PUT" and (
                    "If-Match" in self.headers or "If-None-Match" in self.headers
                )
                if conditional:
                    proxy.conditional_puts += 1
                if (
                    conditional
                    and proxy.mode == "drop-conditional-put"
                    and urlsplit(self.path).path.endswith(proxy.drop_suffix)
                    and response.status == 200
                ):
                    proxy.mode = "forward"
                    proxy.dropped += 1
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
