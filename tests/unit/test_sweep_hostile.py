"""The sweep against stand-in servers that lie: the oracle's engine behind a /metrics that is broken,
goes backwards, or a completion endpoint that fails mid-sweep. No traceback, no absurd figure."""

import io
import json
import re
import threading
from http.server import ThreadingHTTPServer

import pytest

from seatkit.bench import oracle, oracle_server, run, sweep, workload
from seatkit.bench.selftest import PROMPT
from seatkit.bench.target import Options, Target
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError


def hostile(tmp_path, metrics=None, fail_post=None, prompt=None, seen=None):
    """A sweep of levels 1, 2 against an in-process oracle whose handler is bent by the hooks."""
    engine = oracle.Oracle(tokens_per_step=3.0, step_ms=2.0, k=3, prefill_ms=1.0)
    base = oracle_server.handler_for(engine)
    posts = []

    class Handler(base):
        def do_GET(self):
            text = metrics(engine.metrics()) if self.path == "/metrics" and metrics else None
            if self.path == "/metrics" and metrics:
                self._send(404 if text is None else 200, (text or "").encode(), "text/plain")
            else:
                super().do_GET()

        def do_POST(self):
            posts.append(self.path)
            if seen is not None and self.path == "/v1/completions":
                body = self.rfile.read(int(self.headers["Content-Length"]))
                self.rfile = io.BytesIO(body)  # read again by the oracle's handler
                seen.append(json.loads(body)["prompt"])
            if fail_post and fail_post(len(posts)):
                self.rfile.read(int(self.headers["Content-Length"]))
                self._send(500, b'{"error": "engine died"}')
            else:
                super().do_POST()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        prompt = prompt or Prompt(**{**PROMPT.__dict__, "max_tokens": 200})
        return sweep.sweep(
            Target(f"http://127.0.0.1:{server.server_port}", oracle.MODEL, k=3),
            [prompt],
            Options(warmups=0),
            [1, 2],
            run.RunDir(tmp_path, "h"),
        )
    finally:
        server.shutdown()
        server.server_close()


def test_nan_in_metrics_is_a_clear_error_without_a_thread_traceback(tmp_path, capfd):
    lie = lambda text: re.sub(r"(vllm:generation_tokens_total\{[^}]*\}) \S+", r"\1 NaN", text)  # noqa: E731
    with pytest.raises(SeatError, match="not a finite number"):
        hostile(tmp_path, metrics=lie)
    assert "Traceback" not in capfd.readouterr().err


def test_counters_that_go_backwards_publish_no_factors(tmp_path):
    scrapes = iter(range(10**6))

    # Every scrape reports fewer generated tokens than the one before it.
    def lie(text):
        return re.sub(
            r"(vllm:generation_tokens_total\{[^}]*\}) \S+",
            lambda m: f"{m.group(1)} {10**9 - next(scrapes) * 10**6}",
            text,
        )

    summary = hostile(tmp_path, metrics=lie)
    for row in summary["suites"][PROMPT.suite]["levels"]:
        assert "tokens_per_step" not in row and "ms_per_step" not in row, row
        assert row["alarms"], row
        assert row["usage_vs_counters"]["generation_tokens"] < 0  # shown as it is, not as a figure


def test_a_500_mid_sweep_is_a_clear_error_and_leaves_no_summary(tmp_path):
    with pytest.raises(SeatError, match="answered 500"):
        hostile(tmp_path, fail_post=lambda n: n == 3)  # the second level's second stream
    (folder,) = tmp_path.iterdir()
    assert not (folder / "summary.json").exists()
    assert len((folder / "requests.jsonl").read_text().splitlines()) == 1  # level 1 kept


def test_metrics_that_vanish_after_the_first_scrapes_are_a_clear_error(tmp_path):
    scrapes = iter(range(10**6))
    gone = lambda text: text if next(scrapes) < 3 else None  # noqa: E731 (404 from the 4th on)
    with pytest.raises(SeatError, match="vanished"):
        hostile(tmp_path, metrics=gone)


def test_a_context_suite_is_padded_to_its_context_before_the_sweep(tmp_path):
    (prompt,) = workload.suites(["context"], max_tokens=200, contexts=[2048])[:1]
    seen = []
    summary = hostile(tmp_path, prompt=prompt, seen=seen)
    assert summary["suites"][prompt.suite]["context"] == 2048
    # The oracle's tokenizer gives one token per word: what was streamed holds the context.
    assert seen and all(len(text.split()) >= 2048 * 0.9 for text in seen), [len(t.split()) for t in seen]
