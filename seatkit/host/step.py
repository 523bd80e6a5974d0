"""`seat host verify-p2p --step`: one decode step's communication, replayed, judged against the card.

The probe (p2p_probe.py --step) times a CUDA-graph train of 2 x L all-reduces of (1 + k) x hidden
bf16, the all-reduces one decode step of a TP seat makes, in a one-shot form (SM-issued peer reads,
b12x's shape) and through NCCL, over a self-copy baseline. This module picks L and hidden from the
profile's model, runs the probe, says what share of the published step the train explains, and
keeps the result with the boot id beside verify-p2p's. The published step it is judged against comes
from the reference card (seatkit.doctor.bench.published_step), above host.
"""

from __future__ import annotations

import json

from seatkit.errors import SeatError
from seatkit.host import p2p
from seatkit.host.journal import STATE
from seatkit.host.system import System
from seatkit.seat.profiles import Profile

RESULT = f"{STATE}/verify-p2p-step.json"
FORMS = ("oneshot", "nccl")  # the communication forms; the baseline is what they are held against
LAYERS, HIDDEN = (1, 512), (64, 65536)  # the probe's ranges (p2p_probe_step.step_args), and the CLI's


def model_shape(profile: Profile, system: System) -> tuple[int, int] | str:
    """(layers, hidden) from the base model's config.json on the host, or why not."""
    model = profile.models[profile.model]
    if model.host_dir is None:
        return f"model {profile.model!r} is built, not on the host: give --layers and --hidden"
    path = f"{model.host_dir}/config.json"
    text = system.read(path)
    if text is None:
        return f"{path} is not readable (models not fetched here?): give --layers and --hidden"
    try:
        config = json.loads(text)
        config = config.get("text_config", config)  # multimodal configs nest the language model
        layers, hidden = config["num_hidden_layers"], config["hidden_size"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"{path} has no num_hidden_layers and hidden_size: give --layers and --hidden"
    if not (
        type(layers) is int
        and LAYERS[0] <= layers <= LAYERS[1]
        and type(hidden) is int
        and HIDDEN[0] <= hidden <= HIDDEN[1]
        and hidden % 8 == 0
    ):
        return (
            f"{path} gives num_hidden_layers {layers!r} and hidden_size {hidden!r}, not a model's "
            f"({LAYERS[0]}-{LAYERS[1]} layers, hidden {HIDDEN[0]}-{HIDDEN[1]} in 8s): give --layers and --hidden"
        )
    return layers, hidden


def run(layers: int, hidden: int, replays: int, image: str | None = None) -> dict:
    return p2p.run_probe(
        image, ["--step", "--layers", str(layers), "--hidden", str(hidden), "--replays", str(replays)]
    )


def judge(result: dict, ref: dict | None, k: int | None) -> dict:
    """Verdict, problems, and per form the share of the published step its train explains."""
    problems = []
    step = result["step"]
    forms = step["forms"]
    oneshot = forms.get("oneshot") or {}
    if oneshot.get("correct") is False:
        problems.append(
            f"one-shot all-reduce: {oneshot.get('wrong_count', '?')} wrong sums, "
            f"{oneshot.get('waits_given_up', '?')} flag waits gave up"
        )
    if (forms.get("nccl") or {}).get("correct") is False:
        problems.append("NCCL all-reduce returned a wrong sum")
    peers = step["gpus"] > 1
    verdict = "failed" if problems else "measured" if peers else "one GPU: baseline only"
    if ref and ref.get("k") is not None:
        k = ref[
            "k"
        ]  # the published step ran at the card's k: its train is at that 1+k, whatever the profile says
    tokens = str(1 + k) if k is not None else None
    shares = {}
    if ref and peers and tokens in step["bytes_by_tokens"]:
        budget_us = ref["ms_per_step"] * 1000
        base = (
            min(b["by_tokens"][tokens]["train_us"]["p50"] for b in forms.get("baseline", []))
            if forms.get("baseline")
            else 0.0
        )
        for form in FORMS:
            figures = (forms.get(form) or {}).get("by_tokens", {}).get(tokens)
            if figures and "train_us" in figures:  # absent where the probe stopped on a rank that never came
                train = figures["train_us"]["p50"]
                shares[form] = {
                    "train_us": train,
                    "net_us": train - base,
                    "share": train / budget_us,
                    "net_share": (train - base) / budget_us,
                }
    return {
        **result,
        "verdict": verdict,
        "problems": problems,
        "reference": ref,
        "tokens_per_collective": tokens,
        "shares": shares,
    }


def summary(result: dict) -> str:
    """One line: what the train costs, and what share of the published step it explains."""
    step = result["step"]
    tokens = result.get("tokens_per_collective") or str(max(step["tokens"]))
    base = step["forms"].get("baseline")
    parts = [f"L={step['layers']} hidden={step['hidden']}, {step['collectives']} collectives at 1+k={tokens}"]
    if base and tokens in base[0]["by_tokens"]:
        parts.append(f"baseline {base[0]['by_tokens'][tokens]['train_us']['p50']:.0f} us/train")
    for form, share in result["shares"].items():
        parts.append(
            f"{form} {share['train_us']:.0f} us/train = {100 * share['share']:.1f}% of "
            f"{result['reference']['ms_per_step']} ms/step"
        )
    if tokens not in step["bytes_by_tokens"]:
        parts.append(f"1+k={tokens} not measured (the probe covers 1 to 8)")
    elif step["gpus"] > 1 and result["reference"] is None:
        parts.append("no share: the profile has no published step (a card figure at ctx0) to hold it against")
    if not result["shares"] and step["gpus"] < 2:
        one = (step["forms"].get("oneshot") or {}).get("by_tokens", {}).get(tokens)
        if one and "train_us" in one:
            parts.append(
                f"one-shot on {step['placement']} {one['train_us']['p50']:.0f} us/train "
                "(no peer link: overhead, not communication)"
            )
    return ", ".join(parts)


def step_path(system: System) -> dict:
    """The row `seat host status` shows for the step probe, this boot only."""
    return p2p.kept_row(system, RESULT, "not measured", "seat host verify-p2p --step", summary)


def check_options(step: bool, layers, hidden, replays, profile) -> None:
    if not step and any(v is not None for v in (layers, hidden, replays, profile)):
        raise SeatError(
            "--profile, --layers, --hidden and --replays shape the step probe only",
            "add --step, or leave them out",
        )
    if hidden is not None and hidden % 8:  # refused here, before an image starts only to be refused
        raise SeatError(
            f"--hidden {hidden}: a model's hidden size is a multiple of 8",
            "give the model's hidden_size from its config.json",
            2,
        )
