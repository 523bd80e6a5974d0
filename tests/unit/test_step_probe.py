"""`seat host verify-p2p --step`: the real one-H200 runs judged, the share of the published step,
the per-boot record, status and doctor rows, and the options refused without --step."""

import copy
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from seatkit.cli.app import seat
from seatkit.doctor import host as host_rows
from seatkit.doctor.bench import published_step
from seatkit.errors import SeatError
from seatkit.host import p2p, step
from seatkit.host.system import System
from seatkit.seat import profiles

FIXTURES = Path(__file__).parent.parent / "fixtures"
ONE = json.loads((FIXTURES / "h200-step-probe.json").read_text())  # one H200, one rank
FOUR = json.loads((FIXTURES / "h200-step-probe-4ranks.json").read_text())  # 4 one-shot ranks on it
EIGHT = json.loads((FIXTURES / "h200-step-probe-8ranks.json").read_text())
PROFILE = profiles.load("dsv4-flash-dspark-tp4")


def host(tmp_path, boot="aaaa"):
    (tmp_path / "proc/sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc/sys/kernel/random/boot_id").write_text(boot + "\n")
    return System(root=tmp_path)


def test_the_real_one_gpu_run_is_the_baseline_and_its_checks_held():
    s = ONE["step"]
    assert (s["layers"], s["hidden"], s["collectives"], s["gpus"]) == (61, 7168, 122, 1)
    assert s["tokens"] == list(range(1, 9)) and s["bytes_by_tokens"]["8"] == 8 * 7168 * 2
    (base,) = s["forms"]["baseline"]
    one = s["forms"]["oneshot"]
    assert one["correct"] and one["waits_given_up"] == 0 and one["ranks"] == 1
    for t in map(str, s["tokens"]):
        b, o = base["by_tokens"][t], one["by_tokens"][t]
        for figures in (b, o):
            assert figures["train_us"]["min"] <= figures["train_us"]["p50"] <= figures["train_us"]["p99"]
            assert figures["per_collective_us"]["p50"] == pytest.approx(figures["train_us"]["p50"] / 122)
        assert o["train_us"]["p50"] > b["train_us"]["p50"]  # copy, handshake and sum cost more than a copy
    assert "skipped" in s["forms"]["nccl"]
    judged = step.judge(ONE, published_step(PROFILE), 5)
    assert (
        judged["verdict"] == "one GPU: baseline only" and judged["problems"] == [] and judged["shares"] == {}
    )
    assert "no peer link: overhead, not communication" in step.summary(judged)


def test_ranks_on_one_gpu_met_at_every_handshake_and_cost_more_with_more_ranks():
    four, eight = FOUR["step"]["forms"]["oneshot"], EIGHT["step"]["forms"]["oneshot"]
    assert four["ranks"] == 4 and four["devices"] == [0] * 4 and eight["ranks"] == 8
    assert four["correct"] and eight["correct"] and four["waits_given_up"] == eight["waits_given_up"] == 0
    single = ONE["step"]["forms"]["oneshot"]["by_tokens"]
    for t in ("1", "8"):
        assert (
            single[t]["train_us"]["p50"]
            < four["by_tokens"][t]["train_us"]["p50"]
            < eight["by_tokens"][t]["train_us"]["p50"]
        )


def test_the_published_step_is_read_from_the_card():
    ref = published_step(PROFILE)
    assert ref == {
        "card": "deepspark-readme",
        "figure": "D6-D11-ctx0",
        "ms_per_step": 12.1,
        "tokens_per_step": 2.87,
        "k": 5,
    }


def multi_gpu(train_us: float, correct=True) -> dict:
    """A four-GPU result shaped like the probe's: the one-GPU run with peers and both forms."""
    result = copy.deepcopy(ONE)
    result["step"]["gpus"] = 4
    forms = result["step"]["forms"]
    forms["oneshot"] = copy.deepcopy(forms["oneshot"])
    forms["oneshot"]["by_tokens"]["6"]["train_us"].update(p50=train_us, p99=train_us)
    forms["oneshot"]["correct"] = correct
    forms["oneshot"]["wrong_count"] = 0 if correct else 3
    forms["nccl"] = {
        "ranks": 4,
        "correct": True,
        "by_tokens": {
            "6": {
                "train_us": {"p50": 2 * train_us, "p99": 2 * train_us},
                "per_collective_us": {"p50": train_us / 61, "p99": train_us / 61},
            }
        },
    }
    return result


def test_the_share_of_the_step_is_the_train_at_one_plus_k_over_the_published_step():
    judged = step.judge(multi_gpu(2420.0), published_step(PROFILE), 5)
    base = ONE["step"]["forms"]["baseline"][0]["by_tokens"]["6"]["train_us"]["p50"]
    assert judged["verdict"] == "measured" and judged["tokens_per_collective"] == "6"
    assert judged["shares"]["oneshot"]["share"] == pytest.approx(2420 / 12100)
    assert judged["shares"]["oneshot"]["net_us"] == pytest.approx(2420 - base)
    assert judged["shares"]["nccl"]["share"] == pytest.approx(4840 / 12100)
    assert "oneshot 2420 us/train = 20.0% of 12.1 ms/step" in step.summary(judged)
    failed = step.judge(multi_gpu(2420.0, correct=False), published_step(PROFILE), 5)
    assert failed["verdict"] == "failed" and "3 wrong sums" in failed["problems"][0]


def test_kept_per_boot_and_shown_by_status_and_doctor(tmp_path):
    system = host(tmp_path, "boot-1")
    assert step.step_path(system)["verdict"] == "not measured"
    (row,) = host_rows.step_rows(step.step_path(system))
    assert row.status == "WARN" and row.fix == "seat host verify-p2p --step"
    p2p.store(step.judge(ONE, published_step(PROFILE), 5), system, step.RESULT)
    shown = step.step_path(system)
    assert shown["verdict"] == "one GPU: baseline only on this boot" and "L=61 hidden=7168" in shown["why"]
    assert host_rows.step_rows(shown)[0].status == "OK"
    p2p.store(step.judge(multi_gpu(2420.0, correct=False), published_step(PROFILE), 5), system, step.RESULT)
    assert host_rows.step_rows(step.step_path(system))[0].status == "FAIL"
    assert "from another boot" in step.step_path(host(tmp_path, "boot-2"))["why"]
    system.write(step.RESULT, b"{torn")
    assert "is torn" in step.step_path(system)["why"]


def test_layers_and_hidden_come_from_the_models_config(tmp_path):
    system = System(root=tmp_path)
    assert "not readable" in step.model_shape(PROFILE, system)
    folder = tmp_path / PROFILE.models["base"].host_dir.lstrip("/")
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": 43, "hidden_size": 4096}))
    assert step.model_shape(PROFILE, system) == (43, 4096)
    (folder / "config.json").write_text(
        json.dumps({"text_config": {"num_hidden_layers": 2, "hidden_size": 64}})
    )
    assert step.model_shape(PROFILE, system) == (2, 64)
    (folder / "config.json").write_text("[]")
    assert "no num_hidden_layers" in step.model_shape(PROFILE, system)


def test_step_options_are_refused_without_step_and_unknown_shape_says_what_to_give(tmp_path, monkeypatch):
    runner = CliRunner()
    refused = runner.invoke(seat, ["host", "verify-p2p", "--layers", "61"])
    assert isinstance(refused.exception, SeatError) and "shape the step probe only" in str(refused.exception)
    monkeypatch.setattr("seatkit.cli.host_p2p.System", lambda: System(root=tmp_path))
    unknown = runner.invoke(seat, ["host", "verify-p2p", "--step"])
    assert isinstance(unknown.exception, SeatError) and "--layers 61 --hidden 7168" in str(unknown.exception)
    assert runner.invoke(seat, ["host", "verify-p2p", "--step", "--hidden", "7"]).exit_code == 2


def test_the_cli_runs_the_probe_stores_and_status_shows_it(tmp_path, monkeypatch):
    script = tmp_path / "probe.py"  # stands in for the GPU: prints the real run's JSON for its args
    script.write_text(
        f"import sys; assert sys.argv[1:] == ['--step', '--layers', '61', '--hidden', '7168', "
        f"'--replays', '300'], sys.argv; print(open({str(FIXTURES / 'h200-step-probe.json')!r}).read())"
    )
    monkeypatch.setattr(p2p, "PROBE", script)
    system = host(tmp_path)
    monkeypatch.setattr("seatkit.cli.host_p2p.System", lambda: system)
    shown = CliRunner().invoke(
        seat,
        ["host", "verify-p2p", "--step", "--layers", "61", "--hidden", "7168", "--replays", "300"],
        terminal_width=80,
    )
    assert shown.exit_code == 0, shown.output
    assert "1 rank on GPU 0" in shown.output and "verdict: one GPU: baseline only" in shown.output
    assert max(len(line) for line in shown.output.splitlines()) <= 80
    assert step.step_path(system)["verdict"] == "one GPU: baseline only on this boot"


def test_the_probe_refuses_bad_arguments_and_launch_blocking(monkeypatch):
    monkeypatch.setattr(p2p, "PROBE", Path(p2p.__file__).with_name("p2p_probe.py"))
    with pytest.raises(SeatError, match=r"the probe refused: --layers 0") as caught:
        p2p.run_probe(None, ["--step", "--layers", "0", "--hidden", "7168"])
    assert caught.value.code == p2p.BAD_ARGS
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    with pytest.raises(SeatError, match="CUDA_LAUNCH_BLOCKING is set"):
        p2p.run_probe(None, ["--step", "--layers", "61", "--hidden", "7168", "--tokens", "1-9"])


def test_the_probe_parses_token_lists_and_ranges():
    sys.path.insert(0, str(Path(p2p.__file__).parent))
    import p2p_probe_step

    _, tokens, forms, problems = p2p_probe_step.step_args(
        ["--step", "--layers", "61", "--hidden", "7168", "--tokens", "4,1,4", "--forms", "baseline"]
    )
    assert tokens == [1, 4] and forms == ["baseline"] and problems == []
    _, _, _, problems = p2p_probe_step.step_args(
        ["--step", "--layers", "61", "--hidden", "7168", "--tokens", "x", "--ranks-on-one-gpu", "20"]
    )
    assert any("--tokens x" in p for p in problems) and any("--ranks-on-one-gpu 20" in p for p in problems)


def test_odd_hosts_a_skipped_form_a_large_k_and_the_image_run():
    """No Triton or more than 8 GPUs: the one-shot form is skipped, the rest judged; k past 7."""
    result = multi_gpu(2420.0)
    result["step"]["forms"]["oneshot"] = {"skipped": "triton is not importable here"}
    judged = step.judge(result, published_step(PROFILE), 5)
    assert judged["verdict"] == "measured" and list(judged["shares"]) == ["nccl"]
    beyond = step.judge(multi_gpu(2420.0), {**published_step(PROFILE), "k": None}, 16)  # a card without k
    assert beyond["shares"] == {} and "1+k=17 not measured (the probe covers 1 to 8)" in step.summary(beyond)
    argv = p2p.probe_argv("seat:dsv4", ["--step", "--layers", "61"])
    assert argv[-4:] == ["/seatkit-p2p-probe.py", "--step", "--layers", "61"]


def test_a_rank_that_never_arrives_fails_the_run_and_shows_where_it_stopped(tmp_path, monkeypatch):
    result = multi_gpu(2420.0, correct=False)
    oneshot = result["step"]["forms"]["oneshot"]
    oneshot["by_tokens"] = {"1": {"waits_given_up": {"eager": 8, "warmup": 40}}}
    oneshot.update(waits_given_up=40, wrong_count=0)
    judged = step.judge(result, published_step(PROFILE), 5)
    assert judged["verdict"] == "failed" and "40 flag waits gave up" in judged["problems"][0]
    assert "oneshot" not in judged["shares"]
    script = tmp_path / "probe.py"
    script.write_text(f"print({json.dumps(json.dumps(result))})")
    monkeypatch.setattr(p2p, "PROBE", script)
    monkeypatch.setattr("seatkit.cli.host_p2p.System", lambda: host(tmp_path))
    shown = CliRunner().invoke(
        seat, ["host", "verify-p2p", "--step", "--layers", "61", "--hidden", "7168"], terminal_width=80
    )
    assert shown.exit_code == 1 and "stopped: waits" in shown.output and "verdict: failed" in shown.output


def test_a_huge_token_range_is_refused_before_it_is_built():
    """1-10**12 once built a list of a trillion ints before the range check: memory, not a refusal."""
    sys.path.insert(0, str(Path(p2p.__file__).parent))
    import p2p_probe_step

    _, tokens, _, problems = p2p_probe_step.step_args(
        ["--step", "--layers", "61", "--hidden", "7168", "--tokens", f"1-{10**12}"]
    )
    assert tokens == [] and any(f"--tokens 1-{10**12}" in p for p in problems)
    _, tokens, _, problems = p2p_probe_step.step_args(
        ["--step", "--layers", "61", "--hidden", "7168", "--tokens", "3-5"]
    )
    assert tokens == [3, 4, 5] and problems == []


@pytest.mark.parametrize(
    "printed, said",
    [
        ("5", "last line is not its result"),
        ('"an error"', "last line is not its result"),
    ],
)
def test_a_probe_that_exits_0_with_garbage_is_an_error_not_a_traceback(tmp_path, monkeypatch, printed, said):
    script = tmp_path / "probe.py"
    script.write_text(f"print({printed!r})")
    monkeypatch.setattr(p2p, "PROBE", script)
    monkeypatch.setattr("seatkit.cli.host_p2p.System", lambda: host(tmp_path))
    shown = CliRunner().invoke(seat, ["host", "verify-p2p", "--step", "--layers", "61", "--hidden", "7168"])
    assert isinstance(shown.exception, SeatError) and said in str(shown.exception), shown.exception


@pytest.mark.parametrize(
    "layers, hidden",
    [(0, 7168), (-3, 7168), (61, -7168), (61, 10**9), (True, 7168), (61, 7170), (61.5, 7168)],
)
def test_a_model_config_with_a_shape_no_model_has_says_so_before_the_probe_runs(tmp_path, layers, hidden):
    system = System(root=tmp_path)
    folder = tmp_path / PROFILE.models["base"].host_dir.lstrip("/")
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": layers, "hidden_size": hidden}))
    said = step.model_shape(PROFILE, system)
    assert isinstance(said, str) and f"num_hidden_layers {layers!r}" in said and "give --layers" in said


def test_a_step_probe_past_its_time_limit_names_the_replays_not_only_a_hang(tmp_path, monkeypatch):
    script = tmp_path / "probe.py"
    script.write_text("import time; time.sleep(8)")
    monkeypatch.setattr(p2p, "PROBE", script)
    monkeypatch.setattr(p2p, "PROBE_TIMEOUT_S", 1)
    monkeypatch.setattr("seatkit.cli.host_p2p.System", lambda: host(tmp_path))
    shown = CliRunner().invoke(
        seat, ["host", "verify-p2p", "--step", "--layers", "512", "--hidden", "65536", "--replays", "10000"]
    )
    assert isinstance(shown.exception, SeatError) and "fewer --replays" in str(shown.exception)


def test_a_hidden_size_not_in_8s_is_refused_before_the_probe_or_its_image_starts(tmp_path, monkeypatch):
    ran = tmp_path / "ran"
    script = tmp_path / "probe.py"
    script.write_text(f"open({str(ran)!r}, 'w').close()")
    monkeypatch.setattr(p2p, "PROBE", script)
    monkeypatch.setattr("seatkit.cli.host_p2p.System", lambda: host(tmp_path))
    shown = CliRunner().invoke(seat, ["host", "verify-p2p", "--step", "--layers", "61", "--hidden", "100"])
    assert isinstance(shown.exception, SeatError) and "multiple of 8" in str(shown.exception)
    assert not ran.exists()


def test_a_profile_with_no_published_step_says_why_no_share_is_given():
    smoke = profiles.load("cpu-smoke")
    assert published_step(smoke) is None
    judged = step.judge(multi_gpu(2420.0), None, 5)
    assert judged["shares"] == {} and "no share: the profile has no published step" in step.summary(judged)


def test_the_share_of_the_published_step_is_taken_at_the_cards_k_not_an_edited_profiles():
    judged = step.judge(multi_gpu(2420.0), published_step(PROFILE), 7)  # the profile edited to k=7
    assert judged["tokens_per_collective"] == "6"  # the card's figure was measured at k=5
    assert judged["shares"]["oneshot"]["share"] == pytest.approx(2420 / 12100)


def test_a_symlink_where_the_record_goes_still_shows_the_figures(tmp_path, monkeypatch):
    script = tmp_path / "probe.py"
    script.write_text(f"print(open({str(FIXTURES / 'h200-step-probe.json')!r}).read())")
    monkeypatch.setattr(p2p, "PROBE", script)
    system = host(tmp_path)
    kept = system.path(step.RESULT)
    kept.parent.mkdir(parents=True)
    kept.symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr("seatkit.cli.host_p2p.System", lambda: system)
    shown = CliRunner().invoke(
        seat, ["host", "verify-p2p", "--step", "--layers", "61", "--hidden", "7168"], terminal_width=80
    )
    assert shown.exit_code == 0, shown.exception
    assert "1 rank on GPU 0" in shown.output and "not kept" in shown.output
    assert not (tmp_path / "elsewhere").exists()
