"""A test-only stand-in for a ClickHouse server: enough of ClickHouse's HTTP interface
for clickhouse-connect, answered by an embedded chdb session (the same engine), in a
thread of the test's own process. It lets a test drive history's server path
(open_store(url=...)) end to end and see every statement that arrived.

What it speaks: GET /ping; GET or POST / with the statement in the `query` parameter
and/or the body (ClickHouse joins them: an INSERT's rows follow its statement), the
output format from the statement's FORMAT clause or `default_format`
(TabSeparated otherwise, as ClickHouse), responses uncompressed, errors as ClickHouse
sends them (status 500, `Code: N. DB::Exception: ...`, X-ClickHouse-Exception-Code).
Settings in the URL are ignored: the statements history sends carry their own."""

from __future__ import annotations

import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

_CODE = re.compile(r"Code: (\d+)")
# input('<structure>') in an INSERT ... SELECT: the structure is one quoted literal
# (history/sql.py quotes it; it holds no quote itself).
_INPUT = re.compile(r"input\(('[^']*')\)")


class ChdbServer:
    """`with ChdbServer(path) as url:` a URL for open_store(url=...); `.received`: the
    statements in arrival order (an INSERT without its rows)."""

    def __init__(self, path: Path):
        self.path = path
        self.received: list[str] = []
        self._lock = threading.Lock()

    def __enter__(self) -> str:
        from chdb import session
        self.session = session.Session(str(self.path))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        host, port = self.httpd.server_address
        return f"http://default:secret@{host}:{port}/benchmark"

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.session.close()

    def run(self, statement: str, fmt: str) -> bytes:
        head, _, body = statement.partition("\n") if statement.lstrip().upper().startswith(
            "INSERT") else (statement, "", "")
        with self._lock:  # one chdb session: one statement at a time
            self.received.append(head.strip())
            if "FROM input(" not in head:
                return self.session.query(statement, fmt).bytes()
            # A server feeds input() from the request's body; chdb takes no body, so the
            # body goes to a file and input(structure) becomes file(that, format,
            # structure): the same rows through the same SELECT.
            data = self.path / f"body-{uuid.uuid4().hex}.jsonl"
            data.write_text(body)
            try:
                rewritten = _INPUT.sub(lambda m: f"file('{data}', 'JSONEachRow', {m[1]})",
                                       head.removesuffix(" FORMAT JSONEachRow"))
                return self.session.query(rewritten, fmt).bytes()
            finally:
                data.unlink()


def _handler(server: ChdbServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass  # a test's output is its own

        def do_GET(self) -> None:
            if urlsplit(self.path).path == "/ping":
                self._reply(200, b"Ok.\n", {})
            else:
                self._answer(b"")

        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            self._answer(self.rfile.read(size))

        def _answer(self, body: bytes) -> None:
            params = {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}
            statement = params.get("query", "")
            if body:
                statement = (statement + "\n" if statement else "") + body.decode()
            fmt = params.get("default_format", "TabSeparated")
            try:
                data = server.run(statement, fmt)
            except Exception as exc:  # ClickHouse's own error reply, for the client
                text = str(exc)
                code = (_CODE.search(text) or [None, "1"])[1]
                self._reply(500, text.encode(), {"X-ClickHouse-Exception-Code": code})
                return
            self._reply(200, data, {"X-ClickHouse-Format": fmt})

        def _reply(self, status: int, data: bytes, headers: dict) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-ClickHouse-Query-Id", str(uuid.uuid4()))
            self.send_header("X-ClickHouse-Timezone", "UTC")
            self.send_header("X-ClickHouse-Server-Display-Name", "chdb-test-shim")
            self.send_header("X-ClickHouse-Summary", json.dumps(
                {"read_rows": "0", "read_bytes": "0", "written_rows": "0",
                 "written_bytes": "0", "total_rows_to_read": "0"}))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler
