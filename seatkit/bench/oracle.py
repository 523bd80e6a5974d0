"""A ground-truth streaming server for `seat bench selftest` — a test oracle, never a seat.

It speaks just enough of vLLM's OpenAI API and /metrics for the bench, and emits tokens on a known
schedule: a chosen mean number of tokens per decode step and a fixed step time, so what the bench
measures can be compared with the truth. Run it in its own process, so the client's threads do not
disturb its timing:

    python -m seatkit.bench.oracle --port P --tokens-per-step T --step-ms M [--k K]
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "oracle"


def step_sizes(decode_tokens: int, tokens_per_step: float) -> list[int]:
    """Tokens per step whose running total tracks i * tokens_per_step (exact mean over the run)."""
    sizes, emitted, i = [], 0, 0
    while emitted < decode_tokens:
        i += 1
        size = min(max(1, math.floor(i * tokens_per_step + 1e-9) - emitted), decode_tokens - emitted)
        sizes.append(size)
        emitted += size
    return sizes


def truth(max_tokens: int, tokens_per_step: float, step_ms: float) -> dict:
    steps = len(step_sizes(max_tokens - 1, tokens_per_step))
    decode_s = steps * step_ms / 1000
    return {"tokens_per_step": (max_tokens - 1) / steps, "ms_per_step": step_ms,
            "decode_tok_s": (max_tokens - 1) / decode_s, "decode_steps": steps}


class Oracle:
    def __init__(self, tokens_per_step: float, step_ms: float, k: int, prefill_ms: float):
        if not 1 <= tokens_per_step <= k + 1:
            raise ValueError(f"tokens per step must be within 1..k+1 ({k + 1})")
        self.tokens_per_step, self.step_s, self.k = tokens_per_step, step_ms / 1000, k
        self.prefill_s = prefill_ms / 1000
        self.lock = threading.Lock()
        self.counters: Counter = Counter()
        self.per_position: Counter = Counter()
        self.running = 0

    def metrics(self) -> str:
        label = 'engine="0",model_name="oracle"'
        with self.lock:
            c, pos, running = dict(self.counters), dict(self.per_position), self.running
        lines = [f"vllm:num_requests_running{{{label}}} {running}",
                 f"vllm:num_requests_waiting{{{label}}} 0"]
        for name in ("spec_decode_num_drafts_total", "spec_decode_num_draft_tokens_total",
                     "spec_decode_num_accepted_tokens_total", "generation_tokens_total",
                     "prompt_tokens_total", "inter_token_latency_seconds_count",
                     "inter_token_latency_seconds_sum", "request_decode_time_seconds_sum"):
            lines.append(f"vllm:{name}{{{label}}} {float(c.get(name, 0))}")
        for i in range(self.k):
            lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{label},'
                         f'position="{i}"}} {float(pos.get(i, 0))}')
        lines.append(f'vllm:request_success_total{{{label},finished_reason="length"}} '
                     f'{float(c.get("success_length", 0))}')
        return "\n".join(lines) + "\n"

    def complete(self, body: dict, write) -> None:
        """Stream one completion on the schedule; counters move as vLLM's would."""
        n, prompt_tokens = int(body["max_tokens"]), len(body["prompt"].split())
        with self.lock:
            self.running += 1
        time.sleep(self.prefill_s)
        emitted = 1
        write(self._chunk("t0", emitted, prompt_tokens))
        first = previous = time.monotonic()
        for i, size in enumerate(step_sizes(n - 1, self.tokens_per_step), start=1):
            time.sleep(max(0.0, first + i * self.step_s - time.monotonic()))
            now = time.monotonic()  # timed as a server times itself, not copied from the schedule
            with self.lock:
                c = self.counters
                c["spec_decode_num_drafts_total"] += 1
                c["spec_decode_num_draft_tokens_total"] += self.k
                c["spec_decode_num_accepted_tokens_total"] += size - 1
                c["inter_token_latency_seconds_count"] += 1
                c["inter_token_latency_seconds_sum"] += now - previous
                for position in range(size - 1):
                    self.per_position[position] += 1
            previous = now
            emitted += size
            write(self._chunk("".join(f" t{emitted - j}" for j in range(size, 0, -1)), emitted,
                              prompt_tokens, "length" if emitted == n else None))
        with self.lock:
            c = self.counters
            c["generation_tokens_total"] += n
            c["prompt_tokens_total"] += prompt_tokens
            c["request_decode_time_seconds_sum"] += previous - first
            c["success_length"] += 1
            self.running -= 1
        write(b"data: " + json.dumps({"choices": [], "usage": self._usage(n, prompt_tokens)}).encode()
              + b"\n\ndata: [DONE]\n\n")

    @staticmethod
    def _usage(n: int, prompt_tokens: int) -> dict:
        return {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                "total_tokens": prompt_tokens + n}

    def _chunk(self, text: str, emitted: int, prompt_tokens: int, finish: str | None = None) -> bytes:
        event = {"object": "text_completion", "model": MODEL,
                 "choices": [{"index": 0, "text": text, "finish_reason": finish}],
                 "usage": self._usage(emitted, prompt_tokens)}
        return b"data: " + json.dumps(event).encode() + b"\n\n"


def handler_for(oracle: Oracle):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # chunked streaming, as vLLM's server sends it

        def log_message(self, *args):  # quiet: the bench reads figures, not access logs
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json"):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            routes = {"/health": b"", "/version": json.dumps({"version": "oracle"}).encode(),
                      "/v1/models": json.dumps({"data": [{"id": MODEL}]}).encode()}
            if self.path == "/metrics":
                self._send(200, oracle.metrics().encode(), "text/plain; version=0.0.4")
            elif self.path in routes:
                self._send(200, routes[self.path])
            else:
                self._send(404, b"{}")

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/tokenize":
                self._send(200, json.dumps({"tokens": [len(w) for w in body["prompt"].split()]}).encode())
                return
            if self.path != "/v1/completions":
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

            oracle.complete(body, write)
            self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens-per-step", type=float, required=True)
    parser.add_argument("--step-ms", type=float, required=True)
    parser.add_argument("--k", type=int, default=7)
    parser.add_argument("--prefill-ms", type=float, default=20.0)
    args = parser.parse_args(argv)
    oracle = Oracle(args.tokens_per_step, args.step_ms, args.k, args.prefill_ms)
    ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(oracle)).serve_forever()


if __name__ == "__main__":
    main()
