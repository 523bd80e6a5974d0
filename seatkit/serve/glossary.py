"""Meanings of flags, speculative-config keys and variables (glossary.yaml) for LAUNCH_CONFIG.md."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from seatkit import safe_yaml
from seatkit.errors import SeatError
from seatkit.serve.spec import LaunchSpec, flag_value


@cache
def _glossary() -> dict[str, dict[str, str]]:
    return safe_yaml.read(Path(__file__).parent / "glossary.yaml", "glossary")


def _meaning(section: str, key: str) -> str:
    try:
        return _glossary()[section][key]
    except KeyError:
        raise SeatError(
            f"no meaning for {section} entry {key!r} in seatkit/serve/glossary.yaml",
            "every rendered flag and variable must be explained: add it there",
        ) from None


def explain_flags(spec: LaunchSpec) -> dict[str, list[tuple[str, str, str]]]:
    """(name, value, meaning) rows for the server's flags and the speculative-config keys."""
    p = spec.profile
    values = spec.values({})
    fixed = [
        ("host", values["SEAT_HOST"]),
        ("port", values["SEAT_PORT"]),
        ("served-model-name", p.server.served_model_name),
    ]
    if p.gpus.tensor_parallel_size > 1:
        fixed.append(("tensor-parallel-size", str(p.gpus.tensor_parallel_size)))
    if p.speculative:
        fixed.append(("speculative-config", "(JSON, below)"))
    flags = [(f"--{k}", v, _meaning("flags", k)) for k, v in fixed]
    for key, value in p.vllm_args.items():
        shown = "" if isinstance(value, bool) else flag_value(value)
        flags.append((f"--{key}", shown, _meaning("flags", key)))
    spec_rows = []
    if p.speculative:
        s = p.speculative
        head = {"method": s.method, "num_speculative_tokens": s.num_speculative_tokens}
        if s.draft_model:
            head["model"] = p.models[s.draft_model].mount or "(built locally)"
        spec_rows = [(k, flag_value(v), _meaning("speculative", k)) for k, v in {**head, **s.config}.items()]
    return {"flags": flags, "speculative": spec_rows}


def explain_env(spec: LaunchSpec) -> list[tuple[str, str, str]]:
    extra = spec.profile.docker.extra_env if spec.profile.docker else {}
    rows = [
        (k, v, "An experiment (docker.extra_env)." if k in extra else _meaning("env", k))
        for k, v in spec.env.items()
    ]
    rows += [(k, "(from the launching shell, only when set)", _meaning("env", k)) for k in spec.pass_env]
    if spec.api_key_file:
        rows.append(("VLLM_API_KEY", "(from the key file)", _meaning("env", "VLLM_API_KEY")))
    return rows
