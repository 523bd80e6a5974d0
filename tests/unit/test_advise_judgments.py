"""The judgments of `seat bench advise` (from a hostile review): inputs an unlucky operator, an odd
run, a busy machine or a fault would give it, and the advice it must not print for them. Runs are written as the bench
writes them (summary.json and requests.jsonl, 100 steps a request), their figures chosen."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from seatkit.bench import advise, advise_verdict, sides
from seatkit.errors import SeatError

U = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4)


def fake_run(root, name, k, requests, **conditions) -> str:
    """A run folder: requests are (suite, share of steps kept at each position, ms/step[, drafted
    tokens per step]); 100 steps each."""
    folder = Path(root) / name
    folder.mkdir(parents=True)
    c = {"model": "m", "k": k, "sampling": {"temperature": 0.0}, **conditions}
    (folder / "summary.json").write_text(
        json.dumps({"schema": sides.BENCH_SCHEMA, "conditions": c, "suites": {}})
    )
    lines = []
    for i, (suite, shares, ms, *drafted) in enumerate(requests):
        steps = 100.0
        accepted = [round(u * steps) for u in shares]
        d = drafted[0] if drafted else k
        factors = {
            "decode_steps": steps,
            "accepted_per_position": accepted,
            "acceptance_unconditional": [a / steps for a in accepted],
            "tokens_per_step": 1 + sum(accepted) / steps,
            "draft_tokens": d * steps,
            "ms_per_step": ms,
        }
        record = {"suite": suite, "prompt": f"p{i}", "exclusive": True, "truncated": None}
        lines.append({**record, "alarms": {}, "factors": factors})
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return str(folder)


def requests(shares, k, n=4, suite="code", ms=None, jitter=0.01, noise=(-0.03, 0.01, 0.03, -0.01)):
    """n requests of a suite at k: shares kept +- jitter, ms/step 5 + 0.5 k (or ms) with a little noise."""
    return [
        (
            suite,
            [u + (jitter if i % 2 else -jitter) for u in shares[:k]],
            (ms if ms is not None else 5 + 0.5 * k) + noise[i % len(noise)],
        )
        for i in range(n)
    ]


def judged(sources, max_k=None) -> dict:
    return advise_verdict.judge(advise.advise(sources, max_k))


def cell(advice, suite, k):
    return next(c for c in advice["columns"][suite]["cells"] if c["k"] == k)


def test_an_extrapolated_tok_s_interval_covers_what_its_tokens_per_step_interval_allows(tmp_path):
    """Past k=4 nesting allows anything from no gain (4.83 tokens/step) up: tok/s must allow it too,
    and then the measured k=4 cannot be told from the extrapolated best."""
    schedule = (0.97, 0.96, 0.95, 0.94)
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(schedule, 2)),
            fake_run(tmp_path, "k4", 4, requests(schedule, 4)),
        ]
    )
    for k in (5, 6):
        c = cell(advice, "code", k)
        assert c["from"] == "extrapolated"
        tokens, ms, rate = (advise.shown(c, f) for f in advise.FACTORS)
        assert rate["low"] <= 1000 * tokens["low"] / ms["high"], (k, tokens, rate)
    best = advice["best"]["code"]
    assert best["k"] is None or 4 in best["ties"] or best["k"] == 4, best["text"]


def test_runs_of_different_drafters_are_not_pooled(tmp_path):
    """ngram at k=2, an EAGLE head at k=6: two drafters, one column, 'positions agree'."""
    with pytest.raises(SeatError, match="differ in draft"):
        advise.advise(
            [
                fake_run(tmp_path, "k2", 2, requests((0.9, 0.8), 2), draft_method="ngram"),
                fake_run(tmp_path, "k6", 6, requests(U, 6), draft_method="eagle3", draft_model="x/EAGLE3"),
            ]
        )


def test_runs_at_different_temperatures_are_not_pooled_nor_blamed_on_k(tmp_path):
    """Temperature 0 at k=2 and 1.0 at k=6: acceptance differs by temperature, the kit says the
    drafter depends on k and crowns k=2 of the two."""
    sources = [
        fake_run(tmp_path, "k2", 2, requests((0.9, 0.8), 2)),
        fake_run(
            tmp_path, "k6", 6, requests((0.6, 0.5, 0.4, 0.3, 0.2, 0.1), 6), sampling={"temperature": 1.0}
        ),
    ]
    with pytest.raises(SeatError, match="temperature|sampling"):
        advise.advise(sources)


def test_a_step_time_line_that_falls_with_drafted_tokens_predicts_no_tok_s(tmp_path):
    """A busy host during the k=2 run: 9 ms/step at k=2, 7 at k=6. Drafting more never makes a step
    cheaper; the line's negative slope is load, and must not crown an extrapolated k=8."""
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(U, 2, ms=9.0)),
            fake_run(tmp_path, "k6", 6, requests(U, 6, ms=7.0)),
        ]
    )
    assert (
        advice["line"] is None
        or advice["line"]["slope"] >= 0
        or all(
            c["predicted"] is None or c["predicted"]["decode_tok_s"] is None
            for c in advice["columns"]["code"]["cells"]
        )
    ), advice["best"]["code"]["text"]
    assert advice["best"]["code"]["k"] in (None, 2, 6), advice["best"]["code"]["text"]


def test_max_k_below_a_measured_length_does_not_crown_a_slower_k(tmp_path):
    """--max-k 3 with runs at k=2 and k=6: k=6 was measured faster than any k up to 3."""
    sources = [
        fake_run(tmp_path, "k2", 2, requests(U, 2)),
        fake_run(tmp_path, "k6", 6, requests(U, 6)),
    ]
    fastest = judged(sources)["best"]["code"]
    assert fastest["k"] > 3
    advice = judged(sources, max_k=3)
    best = advice["best"]["code"]
    assert best["k"] is None or "max" in best["text"] or "6" in best["text"], best["text"]
    assert advice["next"], "prints: nothing: the best length stands apart from the others"


def test_max_k_1_does_not_say_the_slope_is_unknown(tmp_path):
    sources = [
        fake_run(tmp_path, "k2", 2, requests(U, 2)),
        fake_run(tmp_path, "k6", 6, requests(U, 6)),
    ]
    advice = judged(sources, max_k=1)
    assert advice["line"] is not None
    assert "slope is unknown" not in advice["best"]["code"]["text"]


def test_a_best_k_predicted_from_one_measured_length_says_it_is_unchecked_and_asks_to_run_it(tmp_path):
    """ngram at k=5 only, code and prose: one k, the slope from the two suites' drafted tokens. The
    sums below k=5 are unchecked (no second length): k=2 is crowned with nothing to run."""
    code = (0.95, 0.9, 0.05, 0.02, 0.01)
    prose = (0.1, 0.05, 0.02, 0.01, 0.0)

    def ngram(shares, fill, suite):
        return [(s, u, 5 + 0.5 * 5 * fill + n / 10, 5 * fill) for s, u, n in requests(shares, 5, suite=suite)]

    advice = judged(
        [
            fake_run(
                tmp_path, "k5", 5, ngram(code, 0.9, "code") + ngram(prose, 0.2, "prose"), draft_method="ngram"
            )
        ]
    )
    best = advice["best"]["code"]
    assert best["k"] is None or best["k"] == 5 or any("k=2" in step for step in advice["next"]), (
        best["text"],
        advice["next"],
    )


def test_an_adaptive_run_is_never_told_its_best_length_stands_apart(tmp_path):
    """An adaptive policy drafting 2..7 tokens a step: the line is fitted, no best k is given, and
    'to make it firmer' must not be empty (the CLI prints 'the best length stands apart')."""
    reqs = [("code", list(U) + [0.3], 5 + 0.5 * d + 0.01 * d, d) for d in range(2, 8)]
    advice = judged([fake_run(tmp_path, "ad", 7, reqs, draft_policy="adaptive-confidence")])
    assert advice["best"]["code"]["k"] is None
    assert advice["next"]


def test_a_failed_k_check_asks_for_the_lengths_between_not_nothing(tmp_path):
    """The drafter's positions move with k: only k=2 and k=6 are judged; k=3..5 were never run, so
    the advice is not firm and must name a run to make."""
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests((0.9, 0.8), 2)),
            fake_run(tmp_path, "k6", 6, requests((0.5, 0.4, 0.3, 0.2, 0.1, 0.05), 6)),
        ]
    )
    assert advice["columns"]["code"]["check"]["status"] == "fails"
    assert advice["next"], "prints: nothing: the best length stands apart from the others"


def test_a_suite_that_drafted_nothing_is_not_sent_to_run_another_k(tmp_path):
    """Runs at k=2 and k=6 whose requests all drafted nothing: no k changes that, and two draft
    lengths were run; 'one drafted length ... run the same suites at k=4' is wrong."""
    advice = judged(
        [
            fake_run(
                tmp_path, "k2", 2, [(s, u, ms, 0.0) for s, u, ms in requests((0, 0), 2, jitter=0, ms=5)]
            ),
            fake_run(
                tmp_path, "k6", 6, [(s, u, ms, 0.0) for s, u, ms in requests((0,) * 6, 6, jitter=0, ms=5)]
            ),
        ]
    )
    assert not any("run the same suites at k=" in step for step in advice["next"]), advice["next"]
    assert "drafted nothing" in " ".join([advice["best"]["code"]["text"], *advice["next"]])


def test_a_drafter_that_costs_more_than_it_keeps_is_not_advised_over_no_draft(tmp_path):
    """Prose keeps 5% at position 1: by the kit's own line, k=1 gives 1.05 / 5.5 ms = 191 tok/s and
    no draft (the intercept, 5 ms) 200. 'best fixed k = 1' is slower than switching drafting off."""
    prose = (0.05, 0.01, 0.0, 0.0, 0.0, 0.0)
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(prose, 2, jitter=0.002)),
            fake_run(tmp_path, "k6", 6, requests(prose, 6, jitter=0.002)),
        ]
    )
    line = advice["line"]
    assert 1000 / line["intercept"] > advice["best"]["code"]["tok_s"]["value"]
    assert advice["best"]["code"]["k"] in (None, 0) or "k=0" in advice["best"]["code"]["text"], advice[
        "best"
    ]["code"]["text"]


def test_identical_repeats_of_one_prompt_are_not_a_zero_spread(tmp_path):
    """Greedy repeats of one prompt give the same counters each time: their spread is 0 but the
    text's is unknown. '2.70 (2.70-2.70)' is a certainty nothing measured."""
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(U, 2, jitter=0)),
            fake_run(tmp_path, "k6", 6, requests(U, 6, jitter=0)),
        ]
    )
    for k in (2, 6):
        tokens = advise.shown(cell(advice, "code", k), "tokens_per_step")
        assert tokens["low"] is None or tokens["low"] < tokens["high"], (k, tokens)


def test_a_lone_request_far_outside_the_other_lengths_spread_fails_the_check(tmp_path):
    """One request at k=2 keeps position 1 on 30% of steps; four at k=6 keep it on 90 +- 1%. That is
    not 'unchecked': predictions from the k=6 positions cannot stand."""
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests((0.3, 0.2), 2, n=1)),
            fake_run(tmp_path, "k6", 6, requests(U, 6)),
        ]
    )
    assert advice["columns"]["code"]["check"]["status"] == "fails", advice["columns"]["code"]["check"]


def test_a_ceiling_resting_on_an_extrapolated_best_says_so(tmp_path):
    code = (0.97, 0.96, 0.95, 0.94, 0.93, 0.92)
    prose = (0.3, 0.05, 0.01, 0.0, 0.0, 0.0)
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(code, 2) + requests(prose, 2, suite="prose", jitter=0.005)),
            fake_run(tmp_path, "k4", 4, requests(code, 4) + requests(prose, 4, suite="prose", jitter=0.005)),
        ]
    )
    assert advice["best"]["code"]["from"] == "extrapolated"
    assert advice["ceiling"] is None or "extrapolat" in advice["ceiling"]["text"], advice["ceiling"]["text"]


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_request_with_a_non_finite_figure_is_refused_with_a_seat_error(tmp_path, bad):
    good = fake_run(tmp_path, "k2", 2, requests(U, 2))
    folder = Path(fake_run(tmp_path, "k6", 6, requests(U, 6)))
    lines = (folder / "requests.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["factors"]["ms_per_step"] = bad
    (folder / "requests.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    try:
        advice = judged([good, str(folder)])
    except SeatError:
        return
    assert "NaN" not in json.dumps(advice) and "Infinity" not in json.dumps(advice)


@pytest.mark.parametrize("line", ["[1, 2]", "null"])
def test_a_line_that_is_not_a_request_is_refused_with_a_seat_error(tmp_path, line):
    good = fake_run(tmp_path, "k2", 2, requests(U, 2))
    folder = Path(fake_run(tmp_path, "k6", 6, requests(U, 6)))
    with (folder / "requests.jsonl").open("a") as f:
        f.write(line + "\n")
    with pytest.raises(SeatError, match="is not a request"):
        advise.advise([good, str(folder)])


def test_a_request_without_counters_is_left_out_and_said(tmp_path):
    good = fake_run(tmp_path, "k2", 2, requests(U, 2))
    folder = Path(fake_run(tmp_path, "k6", 6, requests(U, 6)))
    with (folder / "requests.jsonl").open("a") as f:
        f.write('{"suite": "code", "exclusive": true}\n')
    advice = advise.advise([good, str(folder)])
    assert any("1 counters withheld" in line for line in advice["left_out"]), advice["left_out"]


def test_a_card_whose_positions_do_not_sum_to_its_tokens_per_step_predicts_nothing(tmp_path):
    """Acceptance given per draft (conditional), not per step: 0.8 at each of 5 positions sums to
    5.00 tokens/step; the card says 3.69. The kit notes it and predicts 4.20 at k=4 (more than the
    3.69 measured at k=5, which nesting forbids) and 5.80 (5.00-5.80) at k=6."""
    card = tmp_path / "conditional.yaml"
    card.write_text(
        "source: a test card\n"
        "conditions: {model: m, k: 5, content: prose, context: 0, temperature: 0.0, statistic: mean}\n"
        "figures:\n"
        "  - id: A\n"
        "    what: acceptance per draft, conditional on the position before\n"
        "    source: test\n"
        "    tokens_per_step: 3.69\n"
        "    ms_per_step: 12.0\n"
        "    acceptance_by_position: [0.8, 0.8, 0.8, 0.8, 0.8]\n"
    )
    (column,) = advise.advise([str(card)])["columns"].values()
    assert [c["from"] for c in column["cells"]] == ["measured"], [
        (c["k"], c["from"], advise.shown(c, "tokens_per_step")["value"]) for c in column["cells"]
    ]


def test_a_card_figure_not_asked_for_is_not_said_to_lack_tokens_per_step():
    """`deepspark-readme#D6-D11-ctx0` leaves D7-D11-128k out 'no tokens/step' -- it has 4.22."""
    left = " ".join(advise.advise(["deepspark-readme#D6-D11-ctx0"])["left_out"])
    assert "D7-D11-128k" not in left, left


def test_a_run_between_two_disagreeing_lengths_does_not_hide_their_disagreement(tmp_path):
    """Position 1 at 90% (k=2) and 84% (k=6) fails the check; add k=4 at 87% and every neighbour
    pair is within its spread: 'positions shared by k = 2, 4, 6 agree'."""

    def shares(first):
        return (first, 0.8, 0.7, 0.6, 0.5, 0.4)

    two = fake_run(tmp_path, "k2", 2, requests(shares(0.90), 2, jitter=0.012))
    six = fake_run(tmp_path, "k6", 6, requests(shares(0.84), 6, jitter=0.012))
    assert judged([two, six])["columns"]["code"]["check"]["status"] == "fails"
    four = fake_run(tmp_path, "k4", 4, requests(shares(0.87), 4, jitter=0.012))
    check = judged([two, four, six])["columns"]["code"]["check"]
    assert check["status"] == "fails", check


def test_a_suite_with_its_own_step_time_is_not_predicted_from_another_suites_line(tmp_path):
    """A 32k-context suite (12 ms/step at k=2) benched in the k=2 run only, code in both: the pooled
    line falls (-0.25 ms per drafted token) and predicts the long suite 8 ms/step at k=6, below the
    12 measured with fewer drafted tokens. (Every length past its k=2 is looked at: a suite is shown
    no further than EXTRA past its own longest draft, so k=6 has no row.)"""
    long = (0.95, 0.9, 0.85, 0.8, 0.75, 0.7)
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(U, 2) + requests(long, 2, suite="long-32k", ms=12.0)),
            fake_run(tmp_path, "k6", 6, requests(U, 6)),
        ]
    )
    longer = [c for c in advice["columns"]["long-32k"]["cells"] if c["k"] > 2]
    assert longer
    for c in longer:
        ms = advise.shown(c, "ms_per_step")
        assert ms is None or ms["value"] >= 12.0, (c["k"], ms)


def test_an_extrapolation_from_one_request_has_no_known_spread(tmp_path):
    """One request at k=6: k=6 and every sum below it say 'spread ?', yet k=7 and 8, extrapolated from
    that lone request, print an interval (608.6 (597.5-619.8) tok/s)."""
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(U, 2)),
            fake_run(tmp_path, "k6", 6, requests(U, 6, n=1)),
        ]
    )
    assert advise.shown(cell(advice, "code", 6), "tokens_per_step")["low"] is None
    for k in (7, 8):
        c = cell(advice, "code", k)
        assert c["from"] == "extrapolated"
        assert advise.shown(c, "decode_tok_s")["low"] is None, (k, advise.shown(c, "decode_tok_s"))


def test_the_figure_says_which_measured_points_have_no_spread(tmp_path, monkeypatch):
    """k=2 has four requests, k=6 one: the k=6 point is drawn as an 'x' with no legend entry saying
    its spread is unknown (the legend only reads 'code: measured')."""
    from seatkit.bench import advise_plot, figure

    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(U, 2)),
            fake_run(tmp_path, "k6", 6, requests(U, 6, n=1)),
        ]
    )
    figures = []
    monkeypatch.setattr(figure, "save", lambda fig, path: figures.append(fig) or path)
    advise_plot.draw(advice, tmp_path / "advice.png")
    legend = [t.get_text() for t in figures[0].axes[1].get_legend().get_texts()]
    assert any("unknown" in text for text in legend), legend


def test_a_run_folder_that_does_not_exist_is_not_called_a_missing_card(tmp_path):
    """`seat bench advise runs/typo-k2` answers 'no reference card at runs/typo-k2'."""
    with pytest.raises(SeatError) as error:
        advise.advise([str(tmp_path / "runs" / "20261206T000000Z-code-k2")])
    assert "reference card" not in str(error.value) or "run" in str(error.value).replace(
        str(tmp_path / "runs"), ""
    ), str(error.value)


def test_a_ceiling_whose_spreads_are_unknown_claims_no_gain(tmp_path):
    """One request per suite and length: every best is 'cannot tell', yet the ceiling prints
    'code at k=8: +92% (spread unknown)' -- from an extrapolation, against a k that ties."""
    code = (0.97, 0.96, 0.95, 0.94, 0.93, 0.92)
    prose = (0.3, 0.05, 0.01, 0.0, 0.0, 0.0)
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(code, 2, n=1) + requests(prose, 2, n=1, suite="prose")),
            fake_run(tmp_path, "k6", 6, requests(code, 6, n=1) + requests(prose, 6, n=1, suite="prose")),
        ]
    )
    assert all(b["ties"] or b["k"] is None for b in advice["best"].values())
    ceiling = advice["ceiling"]
    assert ceiling is None or "cannot tell" in ceiling["text"], ceiling["text"]


def test_a_request_whose_counters_went_backwards_is_not_used(tmp_path):
    """A counter reset mid-request: accepted at positions 4-6 of -1. The kit takes it and prints
    an extrapolated interval whose low is above its value (1.29 (1.30-1.29))."""
    prose = (0.3, 0.05, 0.01, 0.0, 0.0, 0.0)
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(prose, 2)),
            fake_run(tmp_path, "k6", 6, requests(prose, 6, n=1)),  # 0 - 0.01: -1 of 100 steps
        ]
    )
    for c in advice["columns"]["code"]["cells"]:
        for factor in advise.FACTORS:
            e = advise.shown(c, factor)
            assert e is None or e["low"] is None or e["low"] <= e["value"] <= e["high"], (c["k"], factor, e)
    assert advice["columns"]["code"]["source"].startswith("4 requests") or advice["left_out"], advice[
        "columns"
    ]["code"]["source"]


def test_a_run_whose_requests_were_all_dropped_is_said_so(tmp_path):
    """The k=6 run shared its seat (no request exclusive): it adds nothing, and the advice says 'one
    draft length measured' with no word that a run given was dropped."""
    two = fake_run(tmp_path, "k2", 2, requests(U, 2))
    six = Path(fake_run(tmp_path, "k6", 6, requests(U, 6)))
    lines = [json.loads(line) for line in (six / "requests.jsonl").read_text().splitlines()]
    (six / "requests.jsonl").write_text("".join(json.dumps({**r, "exclusive": False}) + "\n" for r in lines))
    try:
        advice = judged([two, str(six)])
    except SeatError as error:
        assert "k6" in str(error)
        return
    said = json.dumps([advice["left_out"], advice["columns"]["code"]["check"]["text"], advice["next"]])
    assert "k6" in said, said


def test_a_measured_tok_s_is_the_tok_s_the_run_measured(tmp_path):
    """At max_tokens 128 and 4.9 tokens a step the last step is cut: the run measured 599 tok/s
    (its decode_tok_s), the advice's 'measured' row says the drafter's 616."""
    folder = Path(fake_run(tmp_path, "k6", 6, requests(U, 6)))
    lines = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    for r in lines:  # what the stream delivered: 3% less than the drafter kept
        f = r["factors"]
        f["decode_tok_s"] = 0.97 * 1000 * f["tokens_per_step"] / f["ms_per_step"]
        f["tokens_per_step"] *= 0.97
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    c = cell(judged([str(folder)]), "code", 6)
    measured = sum(r["factors"]["decode_tok_s"] for r in lines) / len(lines)
    assert c["from"] == "measured"
    assert advise.shown(c, "decode_tok_s")["value"] == pytest.approx(measured, rel=0.005)


def test_a_run_whose_drafts_outnumber_its_k_is_not_measured_at_that_k(tmp_path):
    """The seat drafts 5 (ngram, so no drafted-length alarm) but the bench was told --k 2: its
    requests count 5 positions, and the advice prints 4.50 tokens/step 'measured' at k=2, more
    than k=2 can keep (3), and its check 'holds'."""
    drafts_five = [(s, list(U[:5]), 7.5 + (ms - 6) / 10, 5) for s, _, ms in requests(U, 2)]
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, drafts_five, draft_method="ngram"),
            fake_run(tmp_path, "k6", 6, requests(U, 6), draft_method="ngram"),
        ]
    )
    tokens = advise.shown(cell(advice, "code", 2), "tokens_per_step")
    assert tokens["value"] <= 3, tokens


def test_no_step_time_below_zero_is_printed(tmp_path):
    """Load during the k=2 run (12 ms/step) and not the k=6 one (7): the line falls 1.25 ms per
    drafted token and the table prints ms/step below 0 at k=12 and up."""
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(U, 2, ms=12.0)),
            fake_run(tmp_path, "k6", 6, requests(U, 6, ms=7.0)),
        ],
        max_k=16,
    )
    for c in advice["columns"]["code"]["cells"]:
        ms = advise.shown(c, "ms_per_step")
        assert ms is None or ms["value"] > 0, (c["k"], ms)


def test_a_suite_is_extrapolated_no_further_than_two_past_its_own_longest_draft(tmp_path):
    """Code benched at k=2 only, prose at k=6 only: max_k is taken over every column (8), so code is
    extrapolated six positions past what it measured and crowned there: 'k = 8, 942.9 (899.1-986.6)
    tok/s', a +58% ceiling. Its truth (positions 3.. keep 50, 20, 10, 5 %) is about 420 tok/s."""
    code = (0.97, 0.96, 0.5, 0.2, 0.1, 0.05)
    prose = (0.3, 0.05, 0.01, 0.005, 0.002, 0.001)
    advice = judged(
        [
            fake_run(tmp_path, "k2", 2, requests(code, 2)),
            fake_run(tmp_path, "k6", 6, requests(prose, 6, suite="prose", jitter=0.001)),
        ]
    )
    assert max(c["k"] for c in advice["columns"]["code"]["cells"]) <= 2 + advise.EXTRA


def test_a_card_figure_without_k_says_its_k_is_unknown(tmp_path):
    """A card with no k: an empty table over 'one draft length measured: nothing to check against'
    (no length is known) and no word that its 3.69 tokens/step went unused for want of k."""
    card = tmp_path / "nok.yaml"
    card.write_text(
        "source: a test card\n"
        "conditions: {model: m, content: prose, context: 0, temperature: 0.0, statistic: mean}\n"
        "figures:\n"
        "  - id: A\n"
        "    what: a figure with tokens/step and no draft length\n"
        "    source: test\n"
        "    tokens_per_step: 3.69\n"
        "    ms_per_step: 12.0\n"
    )
    advice = advise.advise([str(card)])
    said = json.dumps(
        [advice["left_out"], *(c["notes"] + [c["check"]["text"]] for c in advice["columns"].values())]
    )
    assert "one draft length measured" not in said and " k" in said, said


def test_the_same_run_given_twice_counts_its_requests_once(tmp_path):
    run = fake_run(tmp_path, "k2", 2, requests(U, 2))
    advice = advise.advise([run, run])
    assert advice["columns"]["code"]["source"].startswith("4 requests"), advice["columns"]["code"]["source"]


def test_a_card_that_gives_one_figure_id_twice_loses_neither_figure(tmp_path):
    """Reproduction: a card whose two figures share the id x (k=3 at 2.5 tokens/step, k=5 at 3.5),
    then `seat bench advise CARD`. The rule refusing repeated ids went with the cut ('harmless
    downstream'), but advise keys its columns by card and id: the k=3 figure is silently replaced
    by the k=5 one, and the advice says the card lacks a second draft length it gives."""
    figures = [
        {"id": "x", "what": "at k 3", "source": "s", "tokens_per_step": 2.5, "conditions": {"k": 3}},
        {"id": "x", "what": "at k 5", "source": "s", "tokens_per_step": 3.5, "conditions": {"k": 5}},
    ]
    conditions = {"model": "m", "content": "code", "context": 0, "temperature": 0.0}
    card = tmp_path / "twice.yaml"
    card.write_text(json.dumps({"source": "t", "conditions": conditions, "figures": figures}))
    try:
        advice = advise.advise([str(card)], None)
    except SeatError as exc:
        assert "x" in exc.message  # refused, naming the repeated id: as before the cut
        return
    said = json.dumps(advice["columns"])
    assert "at k 3" in said and "at k 5" in said, said


def test_a_sweep_given_to_advise_is_sent_to_batch_1_runs_not_to_compare(tmp_path):
    """Reproduction: `seat bench advise SWEEP_FOLDER` (a `seat bench --concurrency` run). advise now
    reads summaries through compare's reader, which says "is a concurrency sweep: this splits
    batch-1 runs" and hints "compare two sweeps by their report.md tables": advice about compare,
    where advise said before the cut to give folders of `seat bench run`."""
    folder = tmp_path / "sweep"
    folder.mkdir()
    summary = {"schema": sides.SWEEP_SCHEMA, "conditions": {"model": "m", "sampling": {}}, "suites": {}}
    (folder / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(SeatError) as caught:
        advise.advise([str(folder)], None)
    assert "seat bench run" in caught.value.hint and "compare" not in caught.value.hint
