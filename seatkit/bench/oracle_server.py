"""A ground-truth streaming server for `seat bench selftest` — a test oracle, never a seat.

This is its HTTP face (the routes of vLLM's OpenAI API and /metrics the bench reads, and the faults
a broken server shows) and its command line; seatkit.bench.oracle is its engine:

    python -m seatkit.bench.oracle_server --port P --tokens-per-step T --step-ms M [--batch-ms B] [--k K]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from seatkit.bench.oracle import FAULTS, MODEL, TRICKLE_S, Oracle, Quirks, tokens


class OracleHandler(BaseHTTPRequestHandler):
    """Serves `oracle`, set on the class handler_for makes."""

    protocol_version = "HTTP/1.1"  # chunked streaming, as vLLM's server sends it
    oracle: Oracle

    def log_message(self, *args):  # quiet: the bench reads figures, not access logs
        pass

    def _send(self, status: int, body: bytes, kind: str = "application/json"):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        routes = {
            "/health": b"",
            "/version": json.dumps({"version": self.oracle.quirks.version}).encode(),
            "/v1/models": json.dumps({"data": [{"id": MODEL}]}).encode(),
        }
        if self.path == "/metrics" and self.oracle.quirks.fault == "trickle-metrics":
            self._trickle_body()
        elif self.path == "/metrics" and self.oracle.quirks.fault == "trickle-headers":
            self._trickle_headers()
        elif self.path == "/metrics":
            self._send(200, self.oracle.metrics().encode(), "text/plain; version=0.0.4")
        elif self.path in routes:
            self._send(200, routes[self.path])
        else:
            self._send(404, b"{}")

    def _trickle_body(self):
        body = self.oracle.metrics().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for i in range(len(body)):  # ends when the client leaves (the write fails)
            self.wfile.write(body[i : i + 1])
            self.wfile.flush()
            time.sleep(TRICKLE_S)

    def _trickle_headers(self):
        self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        while True:  # ends when the client leaves (the write fails)
            self.wfile.write(b"z")
            self.wfile.flush()
            time.sleep(TRICKLE_S)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "messages" in body and self.oracle.quirks.no_chat_template:
            self._send(400, json.dumps({"error": "this model has no chat template"}).encode())
            return
        if "messages" in body:  # a chat: the oracle's template is the user's text as it is
            body = {**body, "prompt": "".join(m["content"] for m in body["messages"]), "chat": True}
        if self.path == "/tokenize":
            ids = tokens(body["prompt"])
            answer = (
                [{"id": i, "text": "", "special": False} for i in ids]
                if self.oracle.quirks.fault == "tokenize-list"
                else {"tokens": ids}
            )
            self._send(200, json.dumps(answer).encode())
            return
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self._send(404, b"{}")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def write(data: bytes):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        self.oracle.complete(body, write)
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True


def handler_for(oracle: Oracle) -> type[OracleHandler]:
    """A request handler class serving this oracle."""
    return type("Handler", (OracleHandler,), {"oracle": oracle})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens-per-step", type=float, required=True)
    parser.add_argument("--step-ms", type=float, required=True)
    parser.add_argument("--k", type=int, default=7)
    parser.add_argument("--prefill-ms", type=float, default=20.0)
    parser.add_argument(
        "--batch-ms", type=float, default=0.0, help="step time added per running request beyond the first"
    )
    parser.add_argument(
        "--quirks",
        default="{}",
        help='Quirks as JSON, e.g. \'{"ngram": true, "hide": ["inter_token"]}\' '
        f'or \'{{"fault": "endless"}}\' (faults: {", ".join(FAULTS)})',
    )
    args = parser.parse_args(argv)
    given = json.loads(args.quirks)
    quirks = Quirks(
        **{**given, "hide": frozenset(given.get("hide", ())), "frozen": frozenset(given.get("frozen", ()))}
    )
    # The engine thread must get the interpreter lock back within a fraction of a step, even when
    # 16 writer threads want it (the default switch interval is 5 ms).
    sys.setswitchinterval(0.0002)
    try:  # a clock that others' load can't starve, where the oracle may ask for one (root)
        os.nice(-10)
    except PermissionError:
        pass
    oracle = Oracle(args.tokens_per_step, args.step_ms, args.k, args.prefill_ms, args.batch_ms, quirks)
    ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(oracle)).serve_forever()


if __name__ == "__main__":
    main()
