"""The baseline server of ``run.py``: the standard library's ``ThreadingHTTPServer`` (one thread per
connection, no timeouts), as ``accel k8s extender`` served before issue 32 and as
prometheus_client's ``start_http_server`` serves.  Run as a process; prints ``port N`` and serves
until SIGTERM.

    python _stdlib_server.py extender INVENTORIES.json     # POST /<verb> -> Extender.handle_bytes
    python _stdlib_server.py static FILE                   # GET -> the bytes of FILE (a /metrics page)
"""

from __future__ import annotations

import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def main() -> int:
    mode, path = sys.argv[1], sys.argv[2]
    handle: Any = None
    page = b""
    if mode == "extender":
        from accel.integrations.k8s._extender import Extender, load_inventories

        extender = Extender(inventories=load_inventories(path))
        extender.scheduler  # build the view before serving  # noqa: B018
        handle = extender.handle_bytes
    else:
        page = Path(path).read_bytes()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, data: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(200, page, "text/plain; version=0.0.4; charset=utf-8")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, out = handle(self.path.strip("/"), body)
            self._send(int(status), out, "application/json")

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    print(f"port {httpd.server_address[1]}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown, daemon=True).start())
    httpd.serve_forever()
    httpd.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
