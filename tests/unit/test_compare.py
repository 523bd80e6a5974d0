"""Reference cards, the factor split, the noise verdict, refusal across models, and parity."""

import json
import math
import os
import re
import subprocess

import pytest
import yaml
from conftest import BIN, REPO, run_dir

from seatkit.bench import (
    aggregate,
    cards,
    compare,
    parity,
    run,
    sides,
    sweep,
    verdicts,
)
from seatkit.errors import SeatError


@pytest.mark.parametrize("name", ["deepspark-readme", "paper-pt-r-2026-042"])
def test_shipped_cards_load_with_sources_and_units(name):
    card = cards.load(name)
    assert card.source and card.figures
    for figure in card.figures:
        assert figure.source and figure.what
        assert card.conditions_of(figure)["model"]


def card_file(tmp_path, figures, conditions=None):
    data = {
        "source": "test",
        "conditions": conditions or {"model": "m", "content": "code", "context": 0, "temperature": 0.0},
        "figures": figures,
    }
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "figure, field, expected",
    [
        ({"id": "x", "what": "w", "source": "s"}, "figures.0", "at least one value"),
        (
            {"id": "x", "what": "w", "source": "s", "decode_tok_s": -1},
            "figures.0.decode_tok_s",
            "greater than 0",
        ),
        ({"id": "x", "what": "w", "source": "s", "tok_per_sec": 1}, "figures.0.tok_per_sec", "unknown field"),
        ({"id": "x", "what": "w", "decode_tok_s": 1}, "figures.0.source", "Field required"),
        (
            {"id": "x", "what": "w", "source": "s", "draft_acceptance": 76},
            "figures.0.draft_acceptance",
            "less than or equal to 1",
        ),
        (
            {"id": "x", "what": "w", "source": "s", "decode_tok_s": 1, "conditions": {"content": "poetry"}},
            "figures.0.conditions.content",
            "'code' or 'prose'",
        ),
        (
            {"id": "x", "what": "w", "source": "s", "decode_tok_s": 1, "repeats": {"ms_per_step": [1.0]}},
            "figures.0",
            "which has no value",
        ),
    ],
)
def test_bad_cards_are_rejected_with_the_field_named(tmp_path, figure, field, expected):
    with pytest.raises(SeatError) as caught:
        cards.load(card_file(tmp_path, [figure]))
    assert f"field '{field}'" in caught.value.message and expected in caught.value.message


def entry(side, tps, tau, ms, spread=None, model="m", key="code"):
    return sides.Entry(
        side,
        key,
        key,
        {"model": model, "content": "code", "context": 0},
        {"decode_tok_s": tps, "tokens_per_step": tau, "ms_per_step": ms},
        spread or {},
    )


def test_factor_split_on_hand_computed_cases():
    # Same acceptance, step 21.0 -> 12.2 ms: the whole gap is step time.
    verdict = verdicts.verdict(
        {"decode_tok_s": 21.0 / 12.2, "tokens_per_step": 1.0, "ms_per_step": 12.2 / 21.0},
        entry("a", 1, 1, 1),
        entry("b", 1, 1, 1),
    )
    assert verdict["factor"] == "ms_per_step" and verdict["share"] == pytest.approx(1.0)
    assert "host settings" in verdict["text"]
    # Code 502 vs prose 211 tok/s at 12.2 vs 10.0 ms/step (paper S12-S14): acceptance carries it.
    ratios = {
        "decode_tok_s": 502 / 211,
        "tokens_per_step": (502 * 12.2) / (211 * 10.0),
        "ms_per_step": 12.2 / 10.0,
    }
    assert math.log(ratios["decode_tok_s"]) == pytest.approx(
        math.log(ratios["tokens_per_step"]) - math.log(ratios["ms_per_step"])
    )
    verdict = verdicts.verdict(ratios, entry("a", 1, 1, 1), entry("b", 1, 1, 1))
    assert verdict["factor"] == "tokens_per_step"
    assert verdict["share"] == pytest.approx(
        math.log(ratios["tokens_per_step"]) / math.log(ratios["decode_tok_s"])
    )
    assert "content" in verdict["text"]


def test_noise_verdict_uses_both_spreads():
    ratios = {"decode_tok_s": 1.04, "tokens_per_step": 1.0, "ms_per_step": 1 / 1.04}
    noisy = verdicts.verdict(
        ratios, entry("a", 1, 1, 1, {"decode_tok_s": 0.02}), entry("b", 1, 1, 1, {"decode_tok_s": 0.02})
    )
    assert noisy["within_noise"] and "within noise" in noisy["text"]
    tight = verdicts.verdict(
        ratios, entry("a", 1, 1, 1, {"decode_tok_s": 0.005}), entry("b", 1, 1, 1, {"decode_tok_s": 0.005})
    )
    assert not tight["within_noise"] and tight["factor"] == "ms_per_step"
    unknown = verdicts.verdict(ratios, entry("a", 1, 1, 1), entry("b", 1, 1, 1))
    assert "spread UNKNOWN" in unknown["text"] and "within noise" not in unknown["text"]


def test_a_factor_that_moves_beyond_its_own_spread_is_named_inside_tok_s_noise():
    # k=3 against k=5 on a noisy host: tok/s 33 % apart inside a 37 % spread, but tokens per step
    # are deterministic (no spread) and fell by 28 %.
    ratios = {"decode_tok_s": 0.75, "tokens_per_step": 0.72, "ms_per_step": 0.72 / 0.75}
    spread = {"decode_tok_s": 0.13, "tokens_per_step": 0.0, "ms_per_step": 0.13}
    verdict = verdicts.verdict(ratios, entry("a", 1, 1, 1, spread), entry("b", 1, 1, 1, spread))
    assert not verdict["within_noise"] and verdict["moved"] == ["tokens_per_step"]
    assert verdict["factor"] == "tokens_per_step" and "inside its spread" in verdict["text"]
    steady = {"decode_tok_s": 1.1, "tokens_per_step": 1.0, "ms_per_step": 1 / 1.1}
    assert verdicts.verdict(steady, entry("a", 1, 1, 1, spread), entry("b", 1, 1, 1, spread))["within_noise"]


def test_missing_factor_is_derived_and_marked():
    values = {"decode_tok_s": 502.0, "ms_per_step": 12.2}
    assert sides.derive(values) == ["tokens_per_step"]
    assert values["tokens_per_step"] == pytest.approx(6.1244, abs=1e-3)


def test_comparison_across_models_is_refused_unless_forced(tmp_path):
    a = run_dir(tmp_path, "a", "tiny", 600, 5.5, 9.2)
    b = run_dir(tmp_path, "b", "other", 300, 5.5, 18.3)
    refused = compare.compare(a, b)
    assert refused.refused and "different models" in refused.refused and refused.rows == []
    assert refused.differing["model"] == ["tiny vs other"]
    forced = compare.compare(a, b, force=True)
    assert not forced.refused and forced.rows[0]["verdict"]["factor"] == "ms_per_step"
    assert "| code | code |" in compare.markdown(forced)
    assert json.loads(compare.as_json(forced))["rows"][0]["ratios"]["decode_tok_s"] == 2


def test_run_against_a_card_pairs_by_content_and_context(tmp_path):
    a = run_dir(tmp_path, "a", "DeepSeek-V4.1-Flash-1017", 500, 6.0, 12.0)
    result = compare.compare(a, "paper-pt-r-2026-042")
    labels = [row["b"] for row in result.rows]
    assert any(label.startswith("S12-S14-code") for label in labels)
    assert not any("prose" in label for label in labels)
    assert "statistic" in result.differing


def outputs(text, ids):
    return {"prompt_sha256": "p", "max_tokens": 8, "text": text, "token_ids": ids}


def test_parity_identical_and_first_divergence():
    assert parity.diverge(outputs("abc def", [1, 2]), outputs("abc def", [1, 2])) == {"identical": True}
    d = parity.diverge(outputs("abc def ghi", [1, 2, 3]), outputs("abc dXf ghi", [1, 5, 3]))
    assert not d["identical"] and d["token_position"] == 1 and d["char_position"] == 5
    assert d["a"] == "abc def ghi" and d["b"] == "abc dXf ghi"
    longer = parity.diverge(outputs("abc", [1]), outputs("abcd", [1, 2]))
    assert longer["char_position"] == 3 and longer["token_position"] == 1
    other = parity.diverge(outputs("a", [1]), {**outputs("a", [1]), "prompt_sha256": "q"})
    assert "different prompts" in other["reason"]


def test_parity_compare_of_records(tmp_path):
    for name, text in (("a", "same text"), ("b", "same text"), ("c", "same test")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "parity.json").write_text(
            json.dumps({"schema": parity.SCHEMA, "outputs": {"p1": outputs(text, None)}})
        )
    assert parity.compare(tmp_path / "a", tmp_path / "b")["identical"]
    differ = parity.compare(tmp_path / "a", tmp_path / "c")
    assert not differ["identical"] and differ["prompts"]["p1"]["char_position"] == 7
    with pytest.raises(SeatError, match="no parity record"):
        parity.compare(tmp_path / "a", tmp_path / "missing")


def test_every_factor_beyond_its_spread_is_named_with_its_share():
    # k=3 against k=5 on a busy host (the issue's figures): tokens/step 3.89 vs 5.69 with no
    # spread, ms/step 4.86 vs 3.19 with 5 % spread: both moved, in opposite directions.
    ratios = {"tokens_per_step": 3.89 / 5.69, "ms_per_step": 4.86 / 3.19}
    ratios["decode_tok_s"] = ratios["tokens_per_step"] / ratios["ms_per_step"]
    spread = {"decode_tok_s": 0.05, "tokens_per_step": 0.0, "ms_per_step": 0.05}
    verdict = verdicts.verdict(ratios, entry("a", 1, 1, 1, spread), entry("b", 1, 1, 1, spread))
    assert verdict["moved"] == ["tokens_per_step", "ms_per_step"] and "both factors moved" in verdict["text"]
    assert "tokens per step moved: 46.3% apart, lower on A" in verdict["text"]
    assert "ms per step moved: 52.4% apart, higher on A" in verdict["text"]
    assert "drafting policy and k" in verdict["text"] and "host settings" in verdict["text"]
    shares = verdict["shares"]
    assert shares["tokens_per_step"] + shares["ms_per_step"] == pytest.approx(1)
    assert f"{shares['tokens_per_step']:.0%} of the gap" in verdict["text"]
    # Only step time moved: acceptance is not named.
    steady = {"decode_tok_s": 1 / 1.5, "tokens_per_step": 1.0, "ms_per_step": 1.5}
    only = verdicts.verdict(steady, entry("a", 1, 1, 1, spread), entry("b", 1, 1, 1, spread))
    assert only["moved"] == ["ms_per_step"] and "tokens per step" not in only["text"]


def test_conditions_are_always_listed_with_unknown_where_a_side_does_not_say(tmp_path):
    a = run_dir(tmp_path, "a", "DeepSeek-V4.1-Flash-1017", 500, 6.0, 12.0)
    card = card_file(
        tmp_path,
        [{"id": "x", "what": "w", "source": "s", "decode_tok_s": 100.0}],
        {"model": "DeepSeek-V4.1-Flash-1017", "content": "prose", "context": 4096},
    )
    nothing = compare.compare(a, str(card))
    assert nothing.refused.startswith("nothing to compare")
    assert list(nothing.conditions) == list(sides.CONDITIONS)
    assert nothing.conditions["content"] == "code vs prose"
    assert nothing.conditions["image"] == "unknown vs unknown"
    text = compare.markdown(nothing)
    assert "- content: code vs prose (differs)" in text and "- k: 5 vs unknown (differs)" in text
    assert "- draft policy: unknown vs unknown\n" in text and "- model: DeepSeek" in text


def test_a_url_run_is_refused_against_another_model_and_a_side_without_one(tmp_path):
    url_run = run_dir(tmp_path, "url", "tiny", 600, 5.5, 9.2)  # --url: the served name only
    other = run_dir(tmp_path, "other", "DeepSeek-V4.1-Flash-1017", 500, 6.0, 12.0)
    assert "different models" in compare.compare(url_run, other).refused
    anonymous = card_file(
        tmp_path,
        [{"id": "x", "what": "w", "source": "s", "decode_tok_s": 1.0}],
        {"content": "code", "context": 0},
    )
    refused = compare.compare(url_run, str(anonymous))
    assert refused.refused and refused.differing["model"] == ["tiny vs unknown"]
    assert "tiny vs unknown" in refused.refused


@pytest.mark.parametrize(
    "text",
    ["{not json", '{"conditions": {}, "suites": {"x": {"decode_tok_s": 5}}}', '["a list"]', '{"suites": {}}'],
)
def test_a_corrupted_summary_is_a_clear_error(tmp_path, text):
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text(text)
    with pytest.raises(
        SeatError, match="not a bench summary|not valid JSON for a bench summary|invalid bench summary"
    ):
        compare.compare(good, str(bad))


@pytest.mark.parametrize("tps", [-3, float("nan"), float("inf"), "fast"])
def test_a_summary_with_a_figure_that_is_not_a_positive_number_is_refused(tmp_path, tps):
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    bad = run_dir(tmp_path, "bad", "tiny", tps, 5.5, 9.2)
    with pytest.raises(SeatError, match="field 'suites.code.decode_tok_s.median'"):
        compare.compare(good, bad)


def test_a_sweep_is_not_compared_as_if_it_were_a_batch_1_run(tmp_path):
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    swept = tmp_path / "swept"
    swept.mkdir()
    (swept / "summary.json").write_text(
        json.dumps(
            {
                "schema": sweep.SCHEMA,
                "conditions": {"model": "tiny", "sampling": {}},
                "suites": {"code": {"content": "code", "levels": []}},
            }
        )
    )
    with pytest.raises(SeatError, match="is a concurrency sweep"):
        compare.compare(good, str(swept))


PAPER = "paper-pt-r-2026-042"


@pytest.mark.parametrize(
    "form",
    [
        "paper-pt-r-2026-042",
        "paper-pt-r-2026-042.yaml",
        "bench/references/paper-pt-r-2026-042",
        "bench/references/paper-pt-r-2026-042.yaml",
    ],
)
def test_every_card_form_the_help_shows_loads_from_any_folder(form, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the repository: the form must not be read against it
    assert cards.load(form).name == PAPER


def test_an_unknown_card_is_named_once_never_a_doubled_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SeatError) as caught:
        cards.load("bench/references/nope")
    assert "references/bench/references" not in caught.value.message
    assert caught.value.message.endswith("bench/references/nope.yaml")


def test_code_against_prose_is_compared_and_blames_the_text():
    c = compare.compare(f"{PAPER}#S12-S14-code", f"{PAPER}#S12-S14-prose")
    assert not c.refused and len(c.rows) == 1
    text = c.rows[0]["verdict"]["text"]
    assert text.startswith("acceptance: the text, not the rig (content differs: code vs prose")
    assert c.rows[0]["verdict"]["factor"] == "tokens_per_step"
    # Both whole cards too: code and prose at context 0 pair across contents.
    assert compare.compare(f"{PAPER}#S12-S14-code", "deepspark-readme", force=True).rows


def test_before_after_names_step_time_first_and_the_host_as_its_cause():
    c = compare.compare(f"{PAPER}#S8-after", f"{PAPER}#S8-before")
    v = c.rows[0]["verdict"]
    assert v["factor"] == "ms_per_step" and v["share"] == pytest.approx(0.87, abs=0.01)
    assert v["text"].startswith("step time: the rig. tok/s 87.0% apart")
    assert v["text"].index("ms per step") < v["text"].index("tokens per step")
    assert "differing conditions that can explain it: host settings" in v["text"]
    assert "host_settings" in c.differing and "prompt" not in c.differing


def test_percent_apart_is_the_same_whichever_side_is_a():
    one = compare.compare(f"{PAPER}#S8-after", f"{PAPER}#S8-before").rows[0]["verdict"]["text"]
    other = compare.compare(f"{PAPER}#S8-before", f"{PAPER}#S8-after").rows[0]["verdict"]["text"]
    assert "87.0% apart" in one and "87.0% apart" in other


def test_the_prompt_condition_is_compared(tmp_path):
    a = run_dir(tmp_path, "a", "DeepSeek-V4.1-Flash-1017", 500, 6.0, 12.0)
    c = compare.compare(a, f"{PAPER}#S5")
    assert c.conditions["prompt"] == "unknown vs record" and "prompt" in c.differing
    assert "can move either factor" in c.differing["prompt"][0]


def test_identical_figures_are_the_same():
    c = compare.compare(f"{PAPER}#S5", f"{PAPER}#S5")
    assert c.rows[0]["verdict"]["text"].startswith("the same")


def test_a_figure_one_side_lacks_is_a_dash_with_the_reason_never_none():
    c = compare.compare("deepspark-readme#D1", f"{PAPER}#S12-S14-prose", force=True)
    text = compare.markdown(c)
    assert "None" not in text and "– / 2.11" in text
    assert "A gives no tokens per step (not on the card)" in c.rows[0]["verdict"]["text"]


def test_a_cpu_seats_step_time_gap_is_not_blamed_on_gpu_host_settings_nor_on_noise(tmp_path):
    a = run_dir(tmp_path, "a", "tiny", 300, 5.5, 18.3)
    b = run_dir(tmp_path, "b", "tiny", 600, 5.5, 9.2)
    for folder in (a, b):
        path = tmp_path / folder / "summary.json"
        data = json.loads(path.read_text())
        data["conditions"] |= {"runtime": "native", "device": "cpu", "gpus": [{"name": "H100"}]}
        path.write_text(json.dumps(data))
    text = compare.compare(a, b).rows[0]["verdict"]["text"]
    assert "IOMMU" not in text and "on a CPU seat" in text
    assert "noise" not in text  # 99 % apart against a 1 % spread is a cause, never noise


def test_the_seats_device_is_the_seats_own_never_the_bench_clients_gpus(tmp_path):
    a = run_dir(tmp_path, "a", "tiny", 300, 5.5, 18.3)
    path = tmp_path / a / "summary.json"
    data = json.loads(path.read_text())
    data["conditions"] |= {"gpus": [{"name": "H100"}], "engine_version": "0.32.0"}  # the client's GPU
    path.write_text(json.dumps(data))
    assert compare.compare(a, a).conditions["device"] == "unknown vs unknown"
    assert run.seat_device("0.32.0+cpu", {}) == "cpu"  # vLLM's CPU build says so itself
    assert run.seat_device("0.11.0", {}) is None


def test_a_run_meets_an_ldb_sustained_card_by_the_figure_ldb_would_print(tmp_path):
    a = run_dir(tmp_path, "a", "deepseek-ai/DeepSeek-V4-Flash", 250.0, 2.9, 11.6)
    path = tmp_path / "a" / "summary.json"
    data = json.loads(path.read_text())
    data["conditions"]["sampling"]["temperature"] = 0.1
    data["suites"]["code"]["content"] = "prose"
    bare = json.dumps(data)
    data["suites"]["code"]["harness_figures"] = {
        "llm_decode_bench sustained C=1": {
            "decode_tok_s": 240.0,
            "requests": 5,
            "prefix_cache": "warm",
            "definition": "d",
        }
    }
    path.write_text(json.dumps(data))
    row = compare.compare(a, "deepspark-readme#D6-D11-ctx0").rows[0]
    assert row["a_values"]["decode_tok_s"] == 240.0  # not the per-request 250
    assert row["a_values"]["ms_per_step"] == pytest.approx(2.9 / 240 * 1000)
    assert row["harness"].startswith("harness-matched") and "(as llm_decode_bench" in row["a"]
    # A summary without per-request harness figures (an older run) is refused, with the reason.
    path.write_text(bare)
    refused = compare.compare(a, "deepspark-readme#D6-D11-ctx0").rows[0]
    assert "refused" in refused["verdict"]["text"] and "re-run it with this kit" in refused["verdict"]["text"]


def test_a_picked_figure_without_decode_figures_is_a_clear_error_naming_those_with_one():
    with pytest.raises(SeatError, match="no suite or figure 'D14' with a decode figure") as caught:
        compare.compare("deepspark-readme#D14", f"{PAPER}#S2")
    assert "D1" in caught.value.hint


@pytest.mark.parametrize(
    "cv, why",
    [
        (float("nan"), "got nan"),
        (-1, "greater than or equal to 0"),
        ("wide", "valid number"),
        (float("inf"), "not a finite number"),
    ],
)
def test_a_summary_spread_that_is_not_a_number_is_refused_naming_the_field(tmp_path, cv, why):
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    bad = run_dir(tmp_path, "bad", "tiny", 420, 5.5, 13.1, cv=cv)  # a 30 % step-time gap
    with pytest.raises(SeatError) as caught:
        compare.compare(good, bad)
    assert "field 'suites.code.decode_tok_s.cv'" in caught.value.message and why in caught.value.message


def test_a_summary_count_or_content_out_of_schema_is_refused_naming_the_field(tmp_path):
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    bad = run_dir(tmp_path, "bad", "tiny", 600, 5.5, 9.2)
    data = json.loads((tmp_path / "bad" / "summary.json").read_text())
    data["suites"]["code"]["ms_per_step"]["n"] = 0
    data["suites"]["code"]["content"] = "poetry"
    (tmp_path / "bad" / "summary.json").write_text(json.dumps(data))
    with pytest.raises(SeatError) as caught:
        compare.compare(good, bad)
    assert "suites.code.ms_per_step.n" in caught.value.message
    assert "suites.code.content" in caught.value.message


def test_the_run_writes_its_suites_through_the_same_schema():
    record = {
        "exclusive": True,
        "suite": "code",
        "prompt": "p",
        "content": "code",
        "max_tokens": 8,
        "factors": {"decode_tok_s": float("nan"), "tokens_per_step": 2.0, "ms_per_step": 5.0},
    }
    with pytest.raises(SeatError, match="suites|code.decode_tok_s"):
        aggregate.summarize([record])
    record["factors"]["decode_tok_s"] = 400.0
    assert aggregate.summarize([record])["code"]["decode_tok_s"]["median"] == 400.0


@pytest.mark.parametrize("kind", ["loop", "binary"])
def test_an_unreadable_card_path_is_a_clear_error_never_a_traceback(tmp_path, kind):
    card = tmp_path / "card.yaml"
    if kind == "loop":
        (tmp_path / "other.yaml").symlink_to(card)
        card.symlink_to(tmp_path / "other.yaml")
    else:
        card.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SeatError, match="cannot read this reference card|not UTF-8 text"):
        compare.compare(str(card), f"{PAPER}#S5")


def test_a_factor_the_bench_withheld_is_never_derived_back(tmp_path):
    a = run_dir(tmp_path, "a", "tiny", 600, 5.5, 9.2)
    path = tmp_path / "a" / "summary.json"
    data = json.loads(path.read_text())
    data["suites"]["code"]["ms_per_step"] = None
    data["suites"]["code"]["withheld"] = {"ms_per_step": "withheld in 5 of 5 requests: counters lie"}
    path.write_text(json.dumps(data))
    b = run_dir(tmp_path, "b", "tiny", 300, 5.5, 18.3)
    for x, y, side in ((a, b, "a"), (b, a, "b")):
        row = compare.compare(x, y).rows[0]
        assert "ms_per_step" not in row[f"{side}_values"] and "log_split" not in row
        assert "counters lie" in row["verdict"]["text"]


def test_an_empty_pick_after_the_hash_is_a_clear_error_not_the_whole_side(tmp_path):
    with pytest.raises(SeatError, match="no suite or figure named after the '#'") as caught:
        compare.compare(f"{PAPER}#", f"{PAPER}#S5")
    assert "S8-before" in caught.value.hint


@pytest.mark.parametrize("a, b", [("S8-after", "S8-before"), ("S12-S14-code", "S12-S14-prose")])
def test_each_factors_move_is_the_same_size_whichever_side_is_a(a, b):
    one = compare.compare(f"{PAPER}#{a}", f"{PAPER}#{b}").rows[0]["verdict"]["text"]
    other = compare.compare(f"{PAPER}#{b}", f"{PAPER}#{a}").rows[0]["verdict"]["text"]
    flip = {"higher on A": "lower on A", "lower on A": "higher on A", "code vs prose": "prose vs code"}
    pattern = "|".join(map(re.escape, flip))
    assert re.sub(pattern, lambda m: flip[m.group(0)], one) == other


def test_a_summary_from_before_the_withholding_checks_is_read_with_a_caveat(tmp_path):
    assert sides.BENCH_SCHEMA == run.SCHEMA
    a = run_dir(tmp_path, "a", "tiny", 600, 5.5, 9.2)
    b = run_dir(tmp_path, "b", "tiny", 300, 5.5, 18.3)
    path = tmp_path / "a" / "summary.json"
    path.write_text(path.read_text().replace(sides.BENCH_SCHEMA, "seatkit.bench/1"))
    for x, y in ((a, b), (b, a)):
        text = compare.compare(x, y).rows[0]["verdict"]["text"]
        assert text.startswith("step time: the rig") and "a is an older bench summary" in text
        assert "b is an older" not in text
    assert "older" not in compare.compare(b, b).rows[0]["verdict"]["text"]


def test_two_cards_from_different_harnesses_say_their_tok_s_is_not_defined_alike():
    for a, b in (
        ("deepspark-readme#D6-D11-ctx0", f"{PAPER}#S12-S14-prose"),
        (f"{PAPER}#S12-S14-prose", "deepspark-readme#D6-D11-ctx0"),
    ):
        text = compare.compare(a, b, force=True).rows[0]["verdict"]["text"]
        assert "the harnesses differ" in text and "llm_decode_bench sustained C=1" in text
    same = compare.compare(f"{PAPER}#S8-after", f"{PAPER}#S8-before").rows[0]["verdict"]["text"]
    assert "harnesses differ" not in same


@pytest.mark.parametrize(
    "harness, said",
    [
        ({"tool": "mybench", "mode": "sustained", "concurrency": 1}, "tokens its own way"),
        ({"tool": "llm_decode_bench", "mode": "sustained", "concurrency": 4}, "TTFT gaps"),
    ],
)
def test_a_harness_the_kit_cannot_rebuild_is_refused_without_guessing_its_definition(tmp_path, harness, said):
    a = run_dir(tmp_path, "a", "m", 250.0, 2.9, 11.6)
    card = card_file(
        tmp_path,
        [
            {
                "id": "x",
                "what": "w",
                "source": "s",
                "decode_tok_s": 240.0,
                "tokens_per_step": 2.9,
                "harness": harness,
            }
        ],
    )
    for x, y in ((a, str(card)), (str(card), a)):
        text = compare.compare(x, y).rows[0]["verdict"]["text"]
        assert text.startswith("refused") and said in text and "cannot rebuild" in text


@pytest.mark.parametrize("a, b", [("S8-after", "S8-before"), ("S12-S14-code", "S12-S14-prose")])
def test_the_compare_pages_output_is_what_compare_prints_now(a, b, tmp_path):
    card = "paper-pt-r-2026-042"
    done = subprocess.run(
        [str(BIN / "seat"), "bench", "compare", f"{card}#{a}", f"{card}#{b}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80"},
    )
    shown = done.stdout[done.stdout.index("conditions that differ") :]
    shown = "".join(line.rstrip() + "\n" for line in shown.splitlines())  # the table pads its cells
    readme = (REPO / "docs" / "compare.md").read_text()
    assert f"$ seat bench compare {card}#{a} {card}#{b}\n{shown}" in readme


def _ran(side: str, **provenance) -> str:
    """A run folder whose summary carries this provenance record."""
    summary = os.path.join(side, "summary.json")
    with open(summary) as fh:
        data = json.load(fh)
    data["conditions"]["provenance"] = {"launch_sha256": "a" * 64, "differs": [], **provenance}
    with open(summary, "w") as fh:
        json.dump(data, fh)
    return side


def test_compare_names_what_the_shell_passed_a_seat_but_not_where_it_listens(tmp_path):
    """Seats on other ports and folders ran the same thing; a value passed from the shell is part
    of what one ran."""
    a = _ran(run_dir(tmp_path, "a", "m", 10.0, 2.0, 200.0), knobs={"SEAT_PORT": "8000"}, passed={})
    b = _ran(run_dir(tmp_path, "b", "m", 10.0, 2.0, 200.0), knobs={"SEAT_PORT": "8001"}, passed={})
    assert not compare.compare(a, b).differing
    _ran(b, knobs={"SEAT_PORT": "8001"}, passed={"B12X_MICRO_MAX_ACTIVE_CLUSTERS": "8"})
    assert list(compare.compare(a, b).differing) == ["what the seat ran (its provenance)"]


@pytest.mark.parametrize("text", ["[1, 2]", "null", '"a summary"'])
def test_a_summary_that_is_not_a_mapping_is_said_in_words_not_as_a_python_value(tmp_path, text):
    """Reproduction: summary.json holding `[1, 2]` (or `null`), then `seat bench compare GOOD BAD`.
    The kit says "field '(top level)': Input should be a valid dictionary or instance of Summary
    (got [1, 2])": a class name and a Python literal, where it said before the cut that the file
    is not a bench summary, not a mapping of fields."""
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text(text)
    with pytest.raises(SeatError) as caught:
        compare.compare(good, str(bad))
    said = caught.value.message
    assert "not a bench summary" in said
    assert "instance of Summary" not in said and "got " not in said


def test_a_card_whose_only_figure_has_no_value_is_not_called_another_model(tmp_path):
    """Reproduction: a card with model tiny whose one figure gives no number (the rule that a figure
    needs a value went with the cut), compared with a run of tiny. compare refuses it as 'the two
    sides are different models (tiny vs unknown)', though the card names tiny: the card's real
    fault, a figure without a value, is never said."""
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    card = card_file(
        tmp_path,
        [{"id": "x", "what": "w", "source": "s"}],
        {"model": "tiny", "content": "code", "context": 0, "temperature": 0.0},
    )
    try:
        refused = compare.compare(good, str(card)).refused
    except SeatError as exc:
        refused = exc.message
    assert refused and "different models" not in refused
    assert "value" in refused


def test_a_card_s_repeats_for_a_figure_it_does_not_give_do_not_make_a_within_noise_verdict(tmp_path):
    """Reproduction: a card figure with tokens/step 5.5 and ms/step 9.2 (so tok/s 598, derived) and
    repeats for decode tok/s of 300, 301 and 302, but no decode tok/s value (the rule refusing
    repeats for a field without a value went with the cut). Compared with a run at 600 tok/s,
    the verdict is 'within noise: 0.4% apart', though the card's own repeats are half the run's."""
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    figure = {"id": "x", "what": "w", "source": "s", "tokens_per_step": 5.5, "ms_per_step": 9.2}
    figure["repeats"] = {"decode_tok_s": [300.0, 301.0, 302.0]}
    card = card_file(
        tmp_path, [figure], {"model": "tiny", "content": "code", "context": 0, "temperature": 0.0}
    )
    try:
        rows = compare.compare(good, str(card)).rows
    except SeatError:
        return  # refused, naming the card's fault: as before the cut
    assert rows and all("within noise" not in row["verdict"]["text"] for row in rows)


@pytest.mark.parametrize("field, value", [("model_locks", "sha256:abc"), ("image_labels", ["x"])])
def test_a_summary_condition_of_another_shape_is_refused_naming_the_field(tmp_path, field, value):
    """Reproduction: a run's summary.json whose conditions hold model_locks as a string (or
    image_labels as a list), then `seat bench compare GOOD BAD`. The schema stopped typing these
    with the cut, so the kit says "is not a bench summary (AttributeError: 'str' object has no
    attribute 'items')": a Python exception and literal, where it named the field before."""
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    bad = run_dir(tmp_path, "bad", "tiny", 600, 5.5, 9.2)
    data = json.loads((tmp_path / "bad" / "summary.json").read_text())
    data["conditions"] |= {field: value, "image": "seat:1"}
    (tmp_path / "bad" / "summary.json").write_text(json.dumps(data))
    with pytest.raises(SeatError) as caught:
        compare.compare(good, bad)
    said = caught.value.message
    assert f"conditions.{field}" in said
    assert "Error" not in said and "object has no attribute" not in said


def test_a_card_s_repeats_under_a_misspelt_figure_name_are_refused_naming_it(tmp_path):
    """Reproduction: a card figure (tok/s 560, tokens/step 5.3) with `repeats: {decode_toks:
    [550, 560, 570]}` (a typo), compared with a run. Before the cut the card was refused (repeats given for a field
    with no value); now the repeats are dropped in silence and the verdict says "B's spread is
    unknown (one value, or none given)", though the card gave three."""
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    figure = {"id": "x", "what": "w", "source": "s", "decode_tok_s": 560.0, "tokens_per_step": 5.3}
    figure["repeats"] = {"decode_toks": [550.0, 560.0, 570.0]}
    card = card_file(
        tmp_path, [figure], {"model": "tiny", "content": "code", "context": 0, "temperature": 0.0}
    )
    with pytest.raises(SeatError, match="decode_toks"):
        compare.compare(good, str(card))
