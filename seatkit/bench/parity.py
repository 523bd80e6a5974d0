"""`seat bench parity`: greedy outputs of a fixed prompt set, hashed and stored, and compared.

Speculative decoding is lossless: greedy output must not change with the draft, k, kernels or host
settings. Two parity records either match byte for byte or the first divergence is shown.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from seatkit import safe_yaml
from seatkit.bench.run import new_folder
from seatkit.bench.target import Target
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError

SCHEMA = "seatkit.parity/1"
GREEDY = {"temperature": 0.0, "top_p": 1.0, "seed": 0}
CONTEXT_CHARS = 40
RECORD_BYTES = 64 * 1024 * 1024  # every output's text and token ids


def record(
    target: Target,
    prompts: list[Prompt],
    out_root: Path,
    name: str,
    progress: Callable[[str], None] = lambda m: None,
) -> Path:
    outputs = {}
    for prompt in prompts:
        progress(f"parity: {prompt.name}")
        done = target.stream(prompt, GREEDY, extra={"return_token_ids": True})
        outputs[prompt.name] = {
            "prompt_sha256": prompt.sha256,
            "max_tokens": prompt.max_tokens,
            "text": done.text,
            "text_sha256": hashlib.sha256(done.text.encode()).hexdigest(),
            "token_ids": done.token_ids or None,
            "token_ids_sha256": (
                hashlib.sha256(json.dumps(done.token_ids).encode()).hexdigest() if done.token_ids else None
            ),
        }
    folder = new_folder(out_root, f"parity-{name}")
    made = {"schema": SCHEMA, "model": target.model, "url": target.url, "sampling": GREEDY}
    made |= {"conditions": target.conditions, "outputs": outputs}
    (folder / "parity.json").write_text(json.dumps(made, indent=2) + "\n")
    return folder


def _load(path: str | Path) -> dict:
    path = Path(path)
    file = path / "parity.json" if path.is_dir() else path
    try:
        data = safe_yaml.read_json(file, "parity record", RECORD_BYTES)
    except (OSError, ValueError) as exc:
        raise SeatError(f"no parity record at {file}: {exc}", "seat bench parity PROFILE makes one") from None
    if data.get("schema") != SCHEMA:
        raise SeatError(f"{file} is not a parity record ({SCHEMA})")
    return data


def _first_difference(a, b) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def diverge(a: dict, b: dict) -> dict:
    """One prompt's outputs: identical, or where they first part and what each says there."""
    if a["prompt_sha256"] != b["prompt_sha256"] or a["max_tokens"] != b["max_tokens"]:
        return {"identical": False, "reason": "the two runs sent different prompts or lengths"}
    char = _first_difference(a["text"], b["text"])
    ids_a, ids_b = a.get("token_ids"), b.get("token_ids")
    token = _first_difference(ids_a, ids_b) if ids_a and ids_b else None
    if char is None and token is None:
        return {"identical": True}
    at = char if char is not None else 0
    window = slice(max(0, at - CONTEXT_CHARS), at + CONTEXT_CHARS)
    return {
        "identical": False,
        "token_position": token,
        "char_position": char,
        "a": a["text"][window],
        "b": b["text"][window],
    }


def compare(a: str | Path, b: str | Path) -> dict:
    left, right = _load(a)["outputs"], _load(b)["outputs"]
    common = [name for name in left if name in right]
    if not common:
        raise SeatError("the two parity records share no prompt")
    prompts = {name: diverge(left[name], right[name]) for name in common}
    return {
        "identical": all(p["identical"] for p in prompts.values()),
        "prompts": prompts,
        "only_in_one": sorted(set(left) ^ set(right)),
    }
