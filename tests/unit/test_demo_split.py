"""`seat demo`'s side-by-side: code against prose, and the sentence naming the factor that carries the gap."""

import json

from seatkit.orchestrate import demo


def suite(content, tok_s, tau, ms, spread=0.02):
    stats = lambda v: {"median": v, "min": v * 0.98, "max": v * 1.02, "cv": spread}  # noqa: E731
    return {
        "content": content,
        "decode_tok_s": stats(tok_s),
        "tokens_per_step": stats(tau),
        "ms_per_step": stats(ms),
        "draft_acceptance": stats(0.5),
    }


def summary(code, prose):
    return {
        "schema": "seatkit.bench/1",
        "conditions": {"model": "smollm2", "sampling": {"temperature": 0}},
        "suites": {"demo-code": code, "demo-prose": prose},
    }


def test_acceptance_carrying_the_gap_is_said_so(tmp_path):
    rows, sentence = demo.side_by_side(
        summary(suite("code", 30.0, 3.6, 120.0), suite("prose", 10.0, 1.2, 120.0)), tmp_path
    )
    assert "code decodes 3.00x as fast as prose" in sentence
    assert "acceptance (tokens/step 3.00x) carries 100% of the gap" in sentence
    assert "step time (ms/step 1.00x) did not move beyond its own spread" in sentence
    assert "acceptance carries the difference" in sentence
    assert "the text, not the rig" in sentence  # content differs: the verdict's headline says it
    assert rows[1][:4] == ("tokens/step", "3.60 (3.53-3.67)", "1.20 (1.18-1.22)", "3.00x")


def test_step_time_carrying_the_gap_is_named_and_a_factor_working_against_is_said(tmp_path):
    _, sentence = demo.side_by_side(
        summary(suite("code", 20.0, 1.2, 60.0), suite("prose", 10.0, 1.2, 120.0)), tmp_path
    )
    assert "step time carries the difference" in sentence
    _, sentence = demo.side_by_side(
        summary(suite("code", 15.0, 3.0, 200.0), suite("prose", 10.0, 1.0, 100.0)), tmp_path
    )
    assert "step time (ms/step 2.00x) works against it" in sentence
    assert "acceptance carries the difference" in sentence


def test_inside_the_noise_no_factor_is_credited(tmp_path):
    rows, sentence = demo.side_by_side(
        summary(suite("code", 10.2, 1.2, 120.0, 0.2), suite("prose", 10.0, 1.2, 120.0, 0.2)), tmp_path
    )
    assert "within noise" in sentence and "carries the difference" not in sentence
    assert json.dumps(rows)


def test_factors_that_cancel_to_the_same_speed_are_said_so_not_split(tmp_path):
    """Twice the tokens per step at twice the step time: no gap to share out, and no crash."""
    _, sentence = demo.side_by_side(
        summary(suite("code", 10.0, 2.0, 200.0), suite("prose", 10.0, 1.0, 100.0)), tmp_path
    )
    assert "no speed difference is claimed" in sentence and "cancel" in sentence
    assert "carries the difference" not in sentence


def test_a_gap_inside_the_tok_s_spread_is_not_credited_to_a_factor(tmp_path):
    rows, sentence = demo.side_by_side(
        summary(suite("code", 10.1, 2.0, 198.0), suite("prose", 10.0, 1.0, 100.0)), tmp_path
    )
    assert "no speed difference is claimed" in sentence and "carries the difference" not in sentence
    assert [row[4] for row in rows] == [""] * len(rows)
    assert "of the gap" not in sentence.split("(")[0]  # no 6966 % shares of a 1 % gap


def test_the_factor_working_against_the_gap_is_the_one_named(tmp_path):
    # Code takes twice the tokens per step at four times the step time: step time makes it slower,
    # acceptance works against that.
    _, sentence = demo.side_by_side(
        summary(suite("code", 5.0, 2.0, 400.0), suite("prose", 10.0, 1.0, 100.0)), tmp_path
    )
    assert "prose decodes 2.00x as fast as code" in sentence
    assert "acceptance (tokens/step 2.00x) works against it" in sentence
    assert "step time (ms/step 4.00x) works against" not in sentence
    assert "step time carries the difference" in sentence
    _, sentence = demo.side_by_side(
        summary(suite("code", 15.0, 3.0, 200.0), suite("prose", 10.0, 1.0, 100.0)), tmp_path
    )
    assert "step time (ms/step 2.00x) works against it" in sentence


def test_a_factor_that_did_not_move_gets_no_share_never_minus_0(tmp_path):
    rows, sentence = demo.side_by_side(
        summary(suite("code", 8.0, 1.2, 150.0), suite("prose", 10.0, 1.2, 120.0)), tmp_path
    )
    assert rows[1][4] == "" and rows[2][4] == "100%"
    assert "-0%" not in sentence and "acceptance (tokens/step 1.00x) did not move" in sentence


def test_the_side_by_side_is_a_grid_at_80_columns_even_at_three_digit_speeds(tmp_path, monkeypatch):
    """Side by side means code and prose on one line: the table must fit, not fall back to blocks."""
    import io

    from rich.console import Console

    from seatkit.cli import demo

    buf = io.StringIO()
    monkeypatch.setattr(demo, "out", Console(file=buf, width=80, force_terminal=False))
    demo.print_side_by_side(
        summary(suite("code", 412.7, 3.18, 107.04), suite("prose", 201.3, 1.35, 96.11)), tmp_path
    )
    lines = buf.getvalue().splitlines()
    table = [line for line in lines if "tokens/step" in line and "3.18 (" in line and "1.35 (" in line]
    assert table, buf.getvalue()  # one row holds both sides
    assert all(len(line) <= 80 for line in lines if not line.startswith("code decodes"))


def test_a_suite_with_no_request_kept_is_said_not_a_key_error(tmp_path):
    """Every prose request shared the seat with another client (discarded: not alone): no prose row."""
    data = summary(suite("code", 30.0, 3.6, 120.0), suite("prose", 10.0, 1.2, 120.0))
    del data["suites"]["demo-prose"]
    rows, sentence = demo.side_by_side(data, tmp_path)
    assert "demo-prose" in sentence and "no request" in sentence
    assert rows[0][1] == "30.0 (29.4-30.6)" and rows[0][2] == "n/a"


def test_a_lead_factor_inside_its_own_spread_is_not_credited_with_the_gap(tmp_path):
    """tok/s moves beyond its spread, tokens/step has the biggest share but moved inside its own:
    the sentence must not say acceptance carries the difference."""
    code, prose = suite("code", 12.0, 1.32, 110.0, 0.01), suite("prose", 10.0, 1.2, 110.0, 0.01)
    for side in (code, prose):
        side["tokens_per_step"]["cv"] = 0.2
        side["decode_tok_s"]["cv"] = 0.02
    _, sentence = demo.side_by_side(summary(code, prose), tmp_path)
    assert "carries the difference" not in sentence
    assert "neither acceptance (tokens/step 1.10x) nor step time" in sentence
    assert "no factor is named as carrying the gap" in sentence
