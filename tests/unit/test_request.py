"""seatkit/bench/request.py and the figures built from its requests, against the ground-truth oracle
misbehaving one known way at a time (oracle.Quirks): every figure the bench prints is right, or withheld with
the reason."""

import json
import statistics
import threading
from http.server import ThreadingHTTPServer

import pytest

from seatkit.bench import aggregate, oracle, oracle_server, request, run, selftest, sweep
from seatkit.bench.target import Options, Target
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError

K = 3
PLAIN = oracle.Quirks()  # an oracle with no quirks


class Server:
    """The oracle in a thread, on a free loopback port (a labelled test oracle, never a seat)."""

    def __init__(self, quirks: oracle.Quirks, tokens_per_step=2.0, step_ms=4.0, prefill_ms=2.0, batch_ms=0.0):
        self.oracle = oracle.Oracle(tokens_per_step, step_ms, K, prefill_ms, batch_ms, quirks)
        self.tokens_per_step, self.step_ms = tokens_per_step, step_ms
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), oracle_server.handler_for(self.oracle))
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def bench(self, tmp_path, max_tokens=101, repeats=3, warmups=1, prompts=None):
        prompts = prompts or [prompt(max_tokens)]
        return run.bench(
            Target(self.url, oracle.MODEL, k=K),
            prompts,
            Options(warmups=warmups, repeats=repeats),
            run.RunDir(tmp_path, "t"),
        )

    def truth(self, max_tokens=101):
        return oracle.truth(max_tokens, self.tokens_per_step, self.step_ms)

    def close(self):
        self.http.shutdown()
        self.http.server_close()


def prompt(max_tokens, words=16, name="p"):
    return Prompt("truth", name, "code", "measure me " * (words // 2), "oracle", max_tokens)


@pytest.fixture
def serve():
    made = []

    def start(quirks=PLAIN, **kw):
        made.append(Server(quirks, **kw))
        return made[-1]

    yield start
    for server in made:
        server.close()


def figure(summary, name):
    s = summary["suites"]["truth"]
    return (s[name] or {}).get("median"), s["withheld"].get(name)


def kept(tmp_path):
    """The bench's own records of its requests measured alone (its one run folder under tmp_path)."""
    folder = next(tmp_path.iterdir())
    records = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    return [r for r in records if r["exclusive"]]


# A loaded host stretches the oracle's sleeps at random, and the oracle times itself as a server
# does: so these tests hold the bench to the clocks the oracle reported, exactly, and its error
# against the schedule is tests/benchmarks/oracle_quirks.py's.


def test_steps_that_draft_nothing_without_the_inter_token_histogram_are_withheld(serve, tmp_path):
    # ngram at 1.5 tokens/step: every other step gives one token and drafts nothing; with no
    # inter-token histogram the drafts counter is the only step count, and it misses those steps.
    server = serve(oracle.Quirks(ngram=True, hide=frozenset({"inter_token_latency"})), tokens_per_step=1.5)
    summary = server.bench(tmp_path)
    for name in ("tokens_per_step", "ms_per_step"):
        value, why = figure(summary, name)
        assert value is None and "drafted nothing" in why, (name, value, why)
    tok_s, _ = figure(summary, "decode_tok_s")  # the stream and the server's clock still stand
    served = [r["factors"]["decode_tokens"] / r["counter_deltas"]["decode_seconds"] for r in kept(tmp_path)]
    assert all(r["factors"]["decode_tokens"] == 100 for r in kept(tmp_path))
    assert tok_s == pytest.approx(statistics.median(served), rel=1e-12)


def test_with_the_histogram_ngram_steps_are_counted_and_exact(serve, tmp_path):
    server = serve(oracle.Quirks(ngram=True), tokens_per_step=1.5)
    value, why = figure(server.bench(tmp_path), "tokens_per_step")
    assert why is None and value == pytest.approx(server.truth()["tokens_per_step"], rel=1e-9)


def test_spec_counters_published_on_a_period_never_print_a_wrong_factor(serve, tmp_path):
    # Spec-decode and per-step counters refreshed every second; success and generation are live.
    server = serve(oracle.Quirks(spec_period_s=1.0), step_ms=3.0)
    summary = server.bench(tmp_path, max_tokens=201, repeats=4)
    records = [
        r
        for r in map(json.loads, next(tmp_path.iterdir()).joinpath("requests.jsonl").read_text().splitlines())
        if r["exclusive"]
    ]
    true = server.truth(201)["tokens_per_step"]
    printed = [r["factors"]["tokens_per_step"] for r in records if r["factors"].get("tokens_per_step")]
    assert all(v == pytest.approx(true, rel=0.01) for v in printed), printed
    withheld = [
        r["factors"]["withheld"].get("tokens_per_step")
        for r in records
        if not r["factors"].get("tokens_per_step")
    ]
    assert withheld and all("publishes them on a period" in why for why in withheld), withheld
    assert summary["suites"]["truth"]["requests"] == 4


def test_inflated_final_usage_with_an_agreeing_counter_uses_the_streams_count(serve, tmp_path):
    server = serve(oracle.Quirks(usage_extra=7, generation_extra=7))
    summary = server.bench(tmp_path)
    true = server.truth()
    assert figure(summary, "tokens_per_step")[0] == pytest.approx(true["tokens_per_step"], rel=1e-9)
    folder = next(tmp_path.iterdir())
    records = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    assert all(r["factors"]["decode_tokens"] == 100 for r in records)  # tok/s counts what streamed
    assert "108 tokens, the stream's running usage 101" in summary["alarms"]["usage-disagrees"]["example"]


def test_inflated_final_usage_with_honest_counters_is_measured_not_blamed_on_others(serve, tmp_path):
    server = serve(oracle.Quirks(usage_extra=7))
    summary = server.bench(tmp_path)
    assert summary["discarded"] == 0
    assert figure(summary, "tokens_per_step")[0] == pytest.approx(server.truth()["tokens_per_step"])


def test_a_server_that_counts_differently_is_refused_by_its_real_disagreement(serve, tmp_path):
    server = serve(oracle.Quirks(generation_extra=7))
    with pytest.raises(SeatError) as caught:
        server.bench(tmp_path, repeats=1, warmups=0)
    said = f"{caught.value.message} {caught.value.hint}"
    assert "server generated 108 tokens, we received 101" in said
    assert "no other request was seen" in said and "stop other clients" not in said


def test_a_first_token_held_in_a_multi_step_event_is_timed_from_that_event(tmp_path):
    # No server clocks at all: decode and TTFT are the client's. The oracle runs in its own
    # process, so the client's threads do not disturb its clock.
    quirks = {"hold_first": True, "hide": ["request_decode_time", "time_to_first_token"]}
    proc, url = selftest.start_oracle(2.0, 10.0, quirks=quirks, k=K)
    try:
        summary = run.bench(
            Target(url, oracle.MODEL, k=K),
            [prompt(61)],
            Options(warmups=1, repeats=3),
            run.RunDir(tmp_path, "t"),
        )
    finally:
        proc.terminate()
        proc.wait()
    # The client's decode clock starts at the event that carried the first 3 tokens, so it counts
    # the 58 tokens after it; without the fix, 60 over those 29 steps of 30 (+3.4 %).
    records = kept(tmp_path)
    for f in (r["factors"] for r in records):
        assert f["first_event_tokens"] == 3 and f["timing_source"] == "client", f
        assert f["client_decode_tok_s"] * f["decode_ms"] / 1000 == pytest.approx(61 - 3, rel=1e-9)
    assert figure(summary, "decode_tok_s")[0] == statistics.median(
        r["factors"]["client_decode_tok_s"] for r in records
    )
    ttft, why = figure(summary, "ttft_ms")
    assert ttft is None and "first event carried 3 tokens" in why
    assert summary["suites"]["truth"]["sources"]["decode_tok_s"].startswith("client clock")


def test_a_busy_second_model_behind_the_same_metrics_is_filtered_out(serve, tmp_path):
    server = serve(oracle.Quirks(other_model=True))
    summary = server.bench(tmp_path)
    assert summary["discarded"] == 0
    assert figure(summary, "tokens_per_step")[0] == pytest.approx(server.truth()["tokens_per_step"])


def test_prefix_cache_hits_are_warm_ttft_and_the_context_fit_is_cold(serve, tmp_path):
    # Cold prefill: 20 ms + 0.5 ms per prompt token; a hit costs 2 ms. One cold request per prompt
    # (its first repeat, a fresh salt), one warm (the salt repeated).
    server = serve(oracle.Quirks(prefix_cache=True, prefill_ms_per_token=0.5), prefill_ms=20.0)
    prompts = [prompt(21, words=w, name=f"w{w}") for w in (20, 100, 200)]
    summary = server.bench(tmp_path, repeats=2, warmups=1, prompts=prompts)
    s = summary["suites"]["truth"]
    assert s["prefix_cache"] == {"cold": 3, "warm": 3, "unknown": 0}
    assert s["sources"]["ttft_ms"] == "server clock (TTFT histogram)"
    records = kept(tmp_path)
    cold = [r for r in records if r["factors"]["prefix_cache"] == "cold"]
    warm = [r for r in records if r["factors"]["prefix_cache"] == "warm"]
    for r in records:  # each TTFT is the server's, and in the figure of its own cache state only
        server_ms = r["counter_deltas"]["ttft_seconds"] * 1000
        assert (r["factors"]["ttft_ms"], r["factors"]["warm_ttft_ms"]) == (
            (server_ms, None) if r in cold else (None, server_ms)
        )
    assert s["warm_ttft_ms"]["median"] == statistics.median(r["factors"]["warm_ttft_ms"] for r in warm)
    line = summary["fits"]["ttft_ms_vs_prompt_tokens"]
    slope, intercept = statistics.linear_regression(
        [r["factors"]["prompt_tokens"] for r in cold], [r["factors"]["ttft_ms"] for r in cold]
    )
    assert line["points"] == 3  # the cold ones alone
    assert (line["slope"], line["intercept"]) == (pytest.approx(slope), pytest.approx(intercept))


def test_the_ldb_sustained_figure_is_rebuilt_from_the_requests(serve, tmp_path):
    # llm_decode_bench's sustained C=1 figure: every token over request time, TTFT included.
    server = serve(prefill_ms=30.0)
    summary = server.bench(tmp_path)
    records = kept(tmp_path)
    ldb = summary["suites"]["truth"]["harness_figures"][aggregate.LDB_SUSTAINED]
    assert ldb["requests"] == 3
    assert ldb["decode_tok_s"] == pytest.approx(
        3 * 101 / sum(r["client_total_s"] for r in records), rel=1e-12
    )  # the first token and the time to it (the 30 ms prefill) inside its window
    served = [r["factors"]["decode_tokens"] / r["counter_deltas"]["decode_seconds"] for r in records]
    assert figure(summary, "decode_tok_s")[0] == pytest.approx(statistics.median(served), rel=1e-12)


def test_the_sweeps_window_keeps_a_slow_scrape_out_of_the_aggregate(tmp_path):
    # /metrics takes 30 ms and holds every stream up meanwhile (vLLM's shares the API loop); the
    # oracle runs in its own process. Without the fix: +0.75 % at 30 ms, in every sweep. A busy
    # host adds its own error, at random: the best of three sweeps must be within 0.4 %. (At 0, 10
    # and 30 ms, side by side: tests/benchmarks/oracle_quirks.py.)
    exposition_ms = 30.0
    true = 4 * 3.0 / 20.0 * 1000
    errors = []
    for attempt in range(3):
        proc, url = selftest.start_oracle(3.0, 20.0, quirks={"exposition_ms": exposition_ms}, k=K)
        try:
            summary = sweep.sweep(
                Target(url, oracle.MODEL, k=K),
                [prompt(301)],
                Options(warmups=1),
                [4],
                run.RunDir(tmp_path, f"s{attempt}"),
            )
        finally:
            proc.terminate()
            proc.wait()
        row = summary["suites"]["truth"]["levels"][0]
        assert row["window"]["scrape_ms"][0] >= exposition_ms
        errors.append(abs(row["aggregate_tok_s"] / true - 1))
        if errors[-1] < 0.004:
            break
    assert min(errors) < 0.004, errors


@pytest.mark.parametrize(
    "quirks",
    [
        oracle.Quirks(prefix_cache=True, prefill_ms_per_token=0.5, frozen=frozenset({"prefix_cache"})),
        oracle.Quirks(prefix_cache=True, prefill_ms_per_token=0.5, hide=frozenset({"prefix_cache"})),
    ],
    ids=["counters-frozen", "no-counters"],
)
def test_a_prefix_cache_the_counters_cannot_see_never_passes_a_warm_ttft_as_cold(serve, tmp_path, quirks):
    # Odd repeats reuse the salt before them: hits (2 ms) the counters do not show. Cold is 70 ms.
    server = serve(quirks, prefill_ms=20.0)
    summary = server.bench(tmp_path, max_tokens=21, repeats=4, prompts=[prompt(21, words=100)])
    s = summary["suites"]["truth"]
    assert s["prefix_cache"]["cold"] == 0  # frozen counters prove nothing
    assert s["ttft_ms"]["n"] == 2 and s["ttft_ms"]["min"] > 50  # the two fresh salts only
    assert "cache_salt of the request before" in s["withheld"]["ttft_ms"]


def test_a_server_that_ignores_cache_salt_has_no_cold_ttft_and_says_so(serve, tmp_path):
    server = serve(
        oracle.Quirks(prefix_cache=True, prefill_ms_per_token=0.5, ignore_salt=True), prefill_ms=20.0
    )
    summary = server.bench(tmp_path, max_tokens=21, repeats=2, prompts=[prompt(21, words=100)])
    s = summary["suites"]["truth"]
    assert s["prefix_cache"] == {"cold": 0, "warm": 2, "unknown": 0}
    assert s["ttft_ms"] is None and "prefix-cache hit" in s["withheld"]["ttft_ms"]
    assert s["warm_ttft_ms"]["n"] == 2  # both requests' TTFTs are warm ones


def test_a_retried_cold_repeat_gets_a_new_salt_never_the_one_its_discarded_try_warmed(
    serve, tmp_path, monkeypatch
):
    server = serve()
    real, salts = request.measure, []

    def first_try_crowded(target, prompt_, options, cache_salt=None, reused_salt=False):
        record = real(target, prompt_, options, cache_salt=cache_salt, reused_salt=reused_salt)
        salts.append(cache_salt)
        if len(salts) % 2 == 1:  # every repeat's first try is discarded as not alone
            record["exclusive"] = False
        return record

    monkeypatch.setattr(run, "measure", first_try_crowded)
    summary = server.bench(tmp_path, max_tokens=21, repeats=2)
    assert summary["discarded"] == 2
    assert salts[0] != salts[1]  # the cold repeat's retry: a fresh salt
    assert salts[2] == salts[3] == salts[1]  # the warm repeat: the cold one's salt
