"""`seat bench` against a real cpu-smoke seat (real vLLM, real ngram speculative decoding)."""

import json
import os
import subprocess
import threading

import pytest
import requests
from conftest import BIN

from seatkit.bench import run, sweep, workload
from seatkit.bench.levels import CLIENT_TIMING, MIN_STEPS, STREAMS_TOLERANCE
from seatkit.bench.target import Options
from seatkit.doctor import targets


@pytest.fixture(scope="module")
def seat(cpu_seats):
    """The run's shared cpu-smoke seat, reached by its record."""
    with cpu_seats.recorded():
        yield cpu_seats.running["cpu-smoke"]


def test_bench_cli_writes_a_full_run_whose_factors_match_the_usage(seat, tmp_path):
    done = subprocess.run(
        [
            str(BIN / "seat"),
            "bench",
            "cpu-smoke",
            "--suite",
            "code,prose",
            "--warmups",
            "1",
            "--repeats",
            "2",
            "--max-tokens",
            "512",
            "--reference",
            "deepspark-readme",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = tmp_path.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert summary["schema"] == run.SCHEMA and set(summary["suites"]) == {"code", "prose"}
    assert summary["conditions"]["profile"] == "cpu-smoke" and summary["conditions"]["k"] == 5
    assert summary["conditions"]["engine_version"] and summary["conditions"]["sampling"]["seed"] == 0
    kept = [r for r in records if r["exclusive"]]
    assert len(kept) == 12 and len(records) == 12 + summary["discarded"]
    for r in kept:
        f = r["factors"]
        assert f["decomposition"] and f["completion_tokens"] == 512
        # tokens/step from the counters against the streamed usage: within 1 %.
        assert abs(f["counters_vs_usage"] - 1) <= 0.01, f
        assert f["tokens_per_step"] > 1 and f["ms_per_step"] > 0
        # The identity, per request, to floating-point precision: tokens/step is what was delivered.
        assert f["tokens_per_step"] == 511 / f["decode_steps"]
        assert f["tokens_per_step"] / (f["ms_per_step"] / 1000) == pytest.approx(
            f["decode_tok_s"], rel=1e-12, abs=0
        )
        assert f["drafter_tokens_per_step"] - f["tokens_per_step"] == pytest.approx(
            f["cut_by_max_tokens"] / f["decode_steps"]
        )
        # Even repeats have a new cache_salt: a cold prefill, by the prefix-cache counters.
        assert f["prefix_cache"] == "cold" if r["repeat"] % 2 == 0 else f["prefix_cache"] in ("cold", "warm")
        ttft = f["warm_ttft_ms"] if f["prefix_cache"] == "warm" else f["ttft_ms"]
        assert f["ttft_source"] == "server" and f["client_ttft_ms"] >= ttft > 0
        assert r["gauges"]["samples"] == 0  # nothing polled /metrics while it streamed
    assert all(h["token_ids_sha256"] for h in summary["prompts"].values())
    assert "| code | code |" in (run_dir / "report.md").read_text()
    assert "code" in done.stdout and "prose" in done.stdout
    plots = sorted(p.name for p in (run_dir / "plots").iterdir())
    # A fit is drawn only when its points spread (one vertical strip says nothing).
    assert (
        {"acceptance_by_position.png", "factor_split.png", "tok_s_by_prompt.png"}
        <= set(plots)
        <= {
            "acceptance_by_position.png",
            "factor_split.png",
            "ms_per_step_vs_drafted.png",
            "tok_s_by_prompt.png",
            "ttft_vs_prompt_tokens.png",
        }
    )
    assert all((run_dir / "plots" / p).read_bytes()[:4] == b"\x89PNG" for p in plots)
    cold = sum(r["factors"]["prefix_cache"] == "cold" for r in kept)
    assert summary["fits"]["ttft_ms_vs_prompt_tokens"]["points"] == cold  # warm TTFTs never fitted
    assert summary["reference"] == "deepspark-readme"  # its curves drawn over the acceptance plot


def test_context_suite_pads_to_token_targets_through_tokenize(seat, tmp_path):
    target = targets.of_profile("cpu-smoke")
    prompts = workload.suites(["context"], max_tokens=128, contexts=[0, 1024, 4096])
    out = run.RunDir(tmp_path, "context")
    summary = run.bench(target, prompts, Options(warmups=0, repeats=1), out)
    assert set(summary["suites"]) == {
        "context ctx 0",
        "context ctx 1k repetitive",
        "context ctx 1k realistic",
    }
    assert set(summary["skipped"]) == {
        "code-python-rate-limiter@ctx-4k-repetitive",
        "code-python-rate-limiter@ctx-4k-realistic",
    }
    for kind in ("repetitive", "realistic"):
        hashes = summary["prompts"][f"code-python-rate-limiter@ctx-1k-{kind}"]
        assert 900 <= hashes["tokens"] <= 1024, hashes  # built to the target by the server's tokenizer
        assert hashes["token_ids_sha256"] and hashes["padding"] == kind


def test_an_overlapping_request_is_detected_discarded_and_rerun(seat, tmp_path, monkeypatch):
    """A second client's long request is already streaming when the first measured one starts."""
    real_stream = run.client.stream
    intruders, answers, streaming = [], [], threading.Event()

    def intrude():
        # Its first streamed token proves it is being decoded (the running gauge can miss it).
        with requests.post(
            f"{seat.url}/v1/completions",
            stream=True,
            timeout=120,
            json={
                "model": "tiny",
                "prompt": "intruder",
                "max_tokens": 1800,
                "temperature": 0,
                "ignore_eos": True,
                "stream": True,
            },
        ) as answer:
            answers.append(answer.status_code)
            for line in answer.iter_lines():
                if line.startswith(b"data: {"):
                    streaming.set()

    def stream_with_an_intruder(*args, **kwargs):
        if intruders:  # the re-run
            return real_stream(*args, **kwargs)
        intruders.append(threading.Thread(target=intrude))
        intruders[0].start()
        assert streaming.wait(60), "the intruder never streamed a token"
        try:
            return real_stream(*args, **kwargs)
        finally:
            intruders[0].join()  # done before the re-run looks at the counters: it stays alone

    monkeypatch.setattr(run.client, "stream", stream_with_an_intruder)
    target = targets.of_profile("cpu-smoke")
    prompt = workload.suites(["prose"], max_tokens=512)[0]
    out = run.RunDir(tmp_path, "overlap")
    summary = run.bench(target, [prompt], Options(warmups=0, repeats=1), out)
    assert answers == [200]
    records = [json.loads(line) for line in (out.path / "requests.jsonl").read_text().splitlines()]
    assert summary["discarded"] == 1 and [r["exclusive"] for r in records] == [False, True]
    # Whichever finished first, the counters cannot hold our request alone.
    assert any(
        "requests finished" in p or "server generated" in p for p in records[0]["exclusive_problems"]
    ), records[0]["exclusive_problems"]
    assert summary["suites"]["prose"]["requests"] == 1


def sweep_once(out):
    done = subprocess.run(
        [
            str(BIN / "seat"),
            "bench",
            "cpu-smoke",
            "--suite",
            "code",
            "--concurrency",
            "1,2,4",
            "--warmups",
            "1",
            "--max-tokens",
            str(SWEEP_TOKENS),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = out.iterdir()
    return done, run_dir, json.loads((run_dir / "summary.json").read_text())


SWEEP_TOKENS = 1024  # long windows: a step at either edge moves the figures by well under 1%


def client_alarms_due(row, n):
    """The alarms a busy host earns a level, derived here from the level's own figures: the
    bench must raise exactly these (a quiet host earns none, a loaded one some; both pass)."""
    w = row.get("window")
    if w is None:  # the streams never all decoded at once
        return {"client-bottleneck"}
    due = set()
    agg, whole = row["aggregate_tok_s"], row["per_request_decode_tok_s"]["median"]
    if agg is None or abs(agg / (n * whole) - 1) > CLIENT_TIMING:
        due.add("client-timing")
    if w["steps"] < MIN_STEPS * n:
        return due | {"short-window"}
    if max(r for r in w["running_gauge"] if r is not None) < n:
        due.add("client-bottleneck")
    if agg and "counters_tok_s" in row and abs(agg / row["counters_tok_s"] - 1) > STREAMS_TOLERANCE:
        due.add("streams-vs-counters")
    return due


def test_concurrency_sweep_counters_usage_and_streams_agree(seat, tmp_path):
    done, run_dir, summary = sweep_once(tmp_path)
    assert summary["schema"] == sweep.SCHEMA and summary["conditions"]["concurrency"] == [1, 2, 4]
    levels = summary["suites"]["code"]["levels"]
    assert [row["concurrency"] for row in levels] == [1, 2, 4]
    for row in levels:
        n = row["concurrency"]
        # Counters and usage, whatever the host's load: every token the streams were told about,
        # the server counted.
        assert row["usage_vs_counters"] == {
            "usage": SWEEP_TOKENS * n,
            "generation_tokens": SWEEP_TOKENS * n,
            "finished": n,
        }, row
        assert row["per_request_decode_tok_s"]["n"] == n and row["server_ttft_ms"] > 0
        # Never an alarm on the server's counters, and never a figure beside a disagreement
        # the bench kept quiet about: streams against counters, the window's tok/s two ways.
        assert set(row["alarms"]) == client_alarms_due(row, n), row
        if "window" in row and "tokens_per_step" in row:
            w = row["window"]
            assert 0 < w["opens_s"] < w["closes_s"]
            assert 1 <= row["tokens_per_step"] <= 6 and row["ms_per_step"] > 0  # k = 5
    assert "client cost at 4 streams" in done.stdout
    assert (run_dir / "plots" / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert "| 4 |" in (run_dir / "report.md").read_text()
