"""seatkit/bench/sweep.py: the concurrency sweep's arithmetic on hand-made streams (window, rates, counters,
alarms), and the sweep against stand-in servers that lie: a /metrics that is broken or goes backwards, a
completion endpoint that fails."""

import io
import json
import re
import threading
from http.server import ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from seatkit.bench import figure, levels, metrics, oracle, oracle_server, plots, report, run, sweep, workload
from seatkit.bench.selftest import PROMPT
from seatkit.bench.target import Options, Target
from seatkit.bench.workload import Prompt
from seatkit.cli.app import seat
from seatkit.cli.bench_run import _levels
from seatkit.errors import SeatError
from seatkit.serve.client import Completion


def stream(sent, first, step, steps, per_step=4):
    """A stream whose first token comes at `first` and then `per_step` tokens every `step` s."""
    s = levels.Stream(sent=sent)
    s.chunks = [(first, 1)] + [(first + i * step, 1 + i * per_step) for i in range(1, steps + 1)]
    n = s.chunks[-1][1]
    s.done = Completion(completion_tokens=n, ttft_s=first - sent, last_s=s.chunks[-1][0] - sent)
    return s


def edges(n, steps, gen, itl_s, running=(2.0, 2.0), accepted=None):
    values = {"steps": steps, "step_seconds": itl_s, "generation_tokens": gen}
    if accepted is not None:
        values["accepted"] = accepted
    return {"start": 0.0, "end": 1.0, "running": list(running), "delta": metrics.Snapshot(values=values)}


def test_two_streams_in_their_steady_window():
    # Stream a starts at 0.1 s, b at 0.2 s; 10 ms steps of 4 tokens; a finishes first at 1.1 s.
    a, b = stream(0.0, 0.1, 0.01, 100), stream(0.0, 0.2, 0.01, 100)
    counters = edges(2, 180, 720, 1.8, accepted=540)
    row = levels.figures(2, [a, b], counters, None, cpu_s=0.0)
    assert row["window"]["opens_s"] == pytest.approx(0.2) and row["window"]["closes_s"] == pytest.approx(1.1)
    assert row["aggregate_tok_s"] == pytest.approx(800)  # 2 x 400
    assert row["tokens_per_step"] == 4 and row["ms_per_step"] == pytest.approx(10)
    assert row["drafter_tokens_per_step"] == 4 and row["counters_tok_s"] == pytest.approx(800)
    assert row["per_request_decode_tok_s"]["median"] == pytest.approx(400)
    assert not row["alarms"]


def test_a_client_that_never_had_every_stream_decoding_is_the_bottleneck():
    early, late = stream(0.0, 0.1, 0.01, 10), stream(0.0, 0.5, 0.01, 10)  # early ends at 0.2 s
    row = levels.figures(2, [early, late], None, None, cpu_s=0.0)
    assert "client-bottleneck" in row["alarms"] and "aggregate_tok_s" not in row


def test_a_gauge_under_the_level_and_a_short_window_raise_alarms():
    a, b = stream(0.0, 0.1, 0.01, 100), stream(0.0, 0.1, 0.01, 100)
    low = levels.figures(2, [a, b], edges(2, 180, 720, 1.8, running=(1.0, 1.0)), None, 0.0)
    assert "never 2" in low["alarms"]["client-bottleneck"]
    short = levels.figures(2, [a, b], edges(2, 6, 24, 0.06), None, 0.0)
    assert "short-window" in short["alarms"] and "tokens_per_step" not in short


def test_sweep_table_fits_80_columns_and_plot_is_drawn(tmp_path):
    rows = [
        levels.figures(
            n,
            [stream(0.0, 0.1, 0.01 * n, 100) for _ in range(n)],
            edges(n, 100 * n, 400 * n, n * n),
            None,
            0.01,
        )
        for n in (1, 2, 4, 8, 16)
    ]
    suite = {"prompt": "p", "content": "code", "context": 0, "output_tokens": 401, "levels": rows}
    summary = {
        "schema": sweep.SCHEMA,
        "suites": {"code": suite},
        "conditions": {"model": "tiny", "url": "u", "k": 5, "sampling": {}, "concurrency": [1, 2, 4, 8, 16]},
    }
    widths = [
        max(len(h), *(len(r[i]) for r in report.sweep_rows(suite, summary["conditions"])))
        for i, h in enumerate(report.SWEEP_HEADER)
    ]
    assert sum(widths) + 3 * len(widths) + 1 <= 80, widths  # rich's borders and padding
    assert "| 16 |" in report.sweep_markdown(summary)
    path = plots.draw_sweep(summary, tmp_path)
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert "tiny, k=5" in plots.title(summary["conditions"], summary["suites"])


@pytest.mark.parametrize(
    "values",
    [
        {"steps": 200, "step_seconds": 1.0, "generation_tokens": -700},  # counters went backwards
        {"steps": 200, "step_seconds": -1.0, "generation_tokens": 700},
        {"steps": 200, "generation_tokens": 700},  # no inter-token-latency sum
        {"steps": 200, "step_seconds": 1e300, "generation_tokens": 1e308},  # more than was streamed
        {"steps": 1e300, "step_seconds": 1.0, "generation_tokens": 700},  # under a token per step
    ],
)
def test_counters_that_lie_give_an_alarm_and_no_factors(values):
    a, b = stream(0.0, 0.1, 0.01, 100), stream(0.0, 0.1, 0.01, 100)
    counters = {"start": 0.0, "end": 1.0, "running": [2.0, 2.0], "delta": metrics.Snapshot(values=values)}
    row = levels.figures(2, [a, b], counters, None, cpu_s=0.0)
    assert "counters-vs-usage" in row["alarms"]
    assert "tokens_per_step" not in row and "ms_per_step" not in row and "counters_tok_s" not in row
    assert row["aggregate_tok_s"] == pytest.approx(800)  # the client's figure stands


@pytest.mark.parametrize("text", ["0", "-1", "1,1", "2,4,2", "a", ","])
def test_concurrency_levels_must_be_distinct_positive_counts(text):
    with pytest.raises(SeatError, match="not a list of stream counts"):
        _levels(text)
    assert _levels("1,,2") == [1, 2]


def test_an_output_of_one_token_is_refused_before_any_request():
    with pytest.raises(SeatError, match="no decode step"):
        workload.suites(["code"], max_tokens=1)
    assert workload.suites(["code"], max_tokens=2)[0].max_tokens == 2


def test_a_stream_that_sent_no_text_has_no_window():
    empty = levels.Stream(sent=0.0)
    empty.done = Completion(completion_tokens=3, ttft_s=0.0, last_s=0.0)
    row = levels.figures(2, [stream(0.0, 0.1, 0.01, 100), empty], None, None, cpu_s=0.0)
    assert "no-text" in row["alarms"] and "window" not in row and "aggregate_tok_s" not in row


def test_a_title_without_k_says_unknown_not_none():
    suites = {"code": {"content": "code", "context": 0}}
    assert plots.title({"model": "org/tiny", "k": None}, suites).startswith("tiny, k unknown\n")
    assert plots.title({"model": "tiny", "k": 3}, suites).startswith("tiny, k=3\n")


def test_a_server_without_a_running_gauge_is_not_called_a_client_bottleneck():
    a, b = stream(0.0, 0.1, 0.01, 100), stream(0.0, 0.1, 0.01, 100)
    row = levels.figures(2, [a, b], edges(2, 180, 720, 1.8, running=(None, None)), None, 0.0)
    assert "client-bottleneck" not in row["alarms"] and row["tokens_per_step"] == 4
    assert report.sweep_rows({"levels": [row]}, {})[0][-1] == "n/a"


@pytest.mark.parametrize("count, seconds", [(-2, 0.4), (2, -0.4), (0, 0.0), (2, None)])
def test_a_ttft_histogram_gone_backwards_or_empty_gives_no_server_ttft(count, seconds):
    a, b = stream(0.0, 0.1, 0.01, 100), stream(0.0, 0.1, 0.01, 100)
    values = {"ttft_count": count} | ({"ttft_seconds": seconds} if seconds is not None else {})
    row = levels.figures(2, [a, b], None, metrics.Snapshot(values=values), 0.0)
    assert row["server_ttft_ms"] is None


def test_a_reference_card_is_refused_in_a_sweep_rather_than_ignored(tmp_path):
    result = CliRunner().invoke(
        seat,
        [
            "bench",
            "run",
            "--url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--concurrency",
            "1,2",
            "--reference",
            "deepspark-readme",
            "--out",
            str(tmp_path),
        ],
    )
    assert isinstance(result.exception, SeatError) and "a sweep does not plot" in result.exception.message
    assert not list(tmp_path.iterdir())  # refused before any run folder


def test_the_acceptance_axis_points_up_without_k_or_any_tokens_per_step(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(figure, "save", lambda fig, path: figures.append(fig) or path)
    rows = [levels.figures(2, [stream(0.0, 0.1, 0.01, 100)] * 2, None, None, 0.01)]  # no counters
    summary = {
        "schema": sweep.SCHEMA,
        "conditions": {"model": "m", "k": None},
        "suites": {"code": {"content": "code", "context": 0, "levels": rows}},
    }
    plots.draw_sweep(summary, tmp_path)
    low, high = figures[0].axes[-1].get_ylim()
    assert low == 1 and high > low


def test_a_stream_read_in_one_burst_or_late_is_a_client_timing_alarm():
    later = stream(0.0, 0.2, 0.01, 100)
    burst = stream(0.0, 0.1, 0.01, 100)
    burst.chunks = [burst.chunks[0], burst.chunks[-1]]  # all but its first token at once, at 1.1 s
    row = levels.figures(2, [later, burst], None, None, 0.0)
    assert row["aggregate_tok_s"] is None and "one burst" in row["alarms"]["client-timing"]
    # Read late: inside the window the client saw a tenth of the pace the whole requests had.
    slow = stream(0.0, 0.1, 0.01, 100)
    slow.chunks = [(t if t < 0.2 else 0.2 + (t - 0.2) * 10, k) for t, k in slow.chunks]
    row = levels.figures(2, [stream(0.0, 0.1, 0.01, 100), slow], None, None, 0.0)
    assert "read its streams late" in row["alarms"]["client-timing"]


def test_an_aggregate_that_disagrees_with_the_counters_is_flagged_never_silent():
    # The streams give 800 tok/s; the counters' window (with a slow scrape) 12.5 ms steps: 640.
    a, b = stream(0.0, 0.1, 0.01, 100), stream(0.0, 0.2, 0.01, 100)
    counters = edges(2, 180, 720, 2.25) | {"scrape_ms": [210.0, 190.0]}
    row = levels.figures(2, [a, b], counters, None, cpu_s=0.0)
    assert row["aggregate_tok_s"] == pytest.approx(800) and row["counters_tok_s"] == pytest.approx(640)
    assert (
        "+25.0% apart" in row["alarms"]["streams-vs-counters"]
        and "210 ms" in row["alarms"]["streams-vs-counters"]
    )
    agree = levels.figures(2, [a, b], edges(2, 180, 720, 1.8), None, cpu_s=0.0)
    assert "streams-vs-counters" not in agree["alarms"]


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
            if seen is not None and self.path in ("/v1/completions", "/v1/chat/completions"):
                body = json.loads(raw := self.rfile.read(int(self.headers["Content-Length"])))
                self.rfile = io.BytesIO(raw)  # read again by the oracle's handler
                seen.append(body.get("prompt") or body["messages"][0]["content"])
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
    def lie(text):
        return re.sub(r"(vllm:generation_tokens_total\{[^}]*\}) \S+", r"\1 NaN", text)

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
    # By the oracle's own tokenizer, what was streamed holds the context.
    assert seen and all(len(oracle.tokens(text)) >= 2048 * 0.9 for text in seen)
