"""`seat demo`'s side-by-side: code against prose, and the sentence naming the factor that carries the gap."""

import json

from seatkit.orchestrate import demo


def suite(content, tok_s, tau, ms, spread=0.02):
    stats = lambda v: {"median": v, "min": v * 0.98, "max": v * 1.02, "cv": spread}  # noqa: E731
    return {"content": content, "decode_tok_s": stats(tok_s), "tokens_per_step": stats(tau),
            "ms_per_step": stats(ms), "draft_acceptance": stats(0.5)}


def summary(code, prose):
    return {"schema": "seatkit.bench/1", "conditions": {"model": "smollm2", "sampling": {"temperature": 0}},
            "suites": {"demo-code": code, "demo-prose": prose}}


def test_acceptance_carrying_the_gap_is_said_so(tmp_path):
    rows, sentence = demo.side_by_side(summary(suite("code", 30.0, 3.6, 120.0),
                                               suite("prose", 10.0, 1.2, 120.0)), tmp_path)
    assert "code decodes 3.00x as fast as prose" in sentence
    assert "acceptance (tokens/step) carries 100% of the gap" in sentence
    assert "acceptance, not step time, carries the difference" in sentence
    assert rows[1][:4] == ("tokens/step", "3.60 (3.53-3.67)", "1.20 (1.18-1.22)", "3.00x")


def test_step_time_carrying_the_gap_is_named_and_a_factor_working_against_is_said(tmp_path):
    _, sentence = demo.side_by_side(summary(suite("code", 20.0, 1.2, 60.0),
                                            suite("prose", 10.0, 1.2, 120.0)), tmp_path)
    assert "step time, not acceptance, carries the difference" in sentence
    _, sentence = demo.side_by_side(summary(suite("code", 15.0, 3.0, 200.0),
                                            suite("prose", 10.0, 1.0, 100.0)), tmp_path)
    assert "working against it" in sentence and "acceptance, not step time" in sentence


def test_inside_the_noise_no_factor_is_credited(tmp_path):
    rows, sentence = demo.side_by_side(summary(suite("code", 10.2, 1.2, 120.0, 0.2),
                                               suite("prose", 10.0, 1.2, 120.0, 0.2)), tmp_path)
    assert "within noise" in sentence and "carries the difference" not in sentence
    assert json.dumps(rows)
