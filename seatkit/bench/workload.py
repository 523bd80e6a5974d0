"""The bench's workloads: prompt files, each request recording their SHA-256, grouped into suites
(bench/suites.yaml)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from seatkit import paths, safe_yaml
from seatkit.errors import SeatError

BENCH = paths.REPO / "bench"


@dataclass(frozen=True)
class Prompt:
    suite: str
    name: str
    content: str  # code | prose
    text: str
    file_sha256: str
    max_tokens: int
    context: int = 0  # token target of padding + prompt; 0 = the prompt alone
    padding: str | None = None

    @property
    def sha256(self) -> str:
        """Hash of the text as sent (after any repeat), recorded with every request."""
        return hashlib.sha256(self.text.encode()).hexdigest()


def load_prompt(name: str, folder: Path = BENCH / "prompts") -> tuple[str, str]:
    """A prompt's text and the SHA-256 of its file (every request records it, and compare names a
    prompt that differs)."""
    path = folder / f"{name}.txt"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.txt")))
        raise SeatError(f"no prompt {name!r} in {folder}", f"known prompts: {known}")
    data = path.read_bytes()
    return data.decode(), hashlib.sha256(data).hexdigest()


def _label(tokens: int) -> str:
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


def suites(
    names: list[str],
    max_tokens: int | None = None,
    contexts: list[int] | None = None,
    file: Path = BENCH / "suites.yaml",
) -> list[Prompt]:
    """The prompts of each suite; a context suite gives one per context and padding kind, whose
    text is padded against the server at run time (each context reported as a suite of its own)."""
    if max_tokens is not None and max_tokens < 2:
        raise SeatError(
            f"--max-tokens {max_tokens} leaves no decode step to measure",
            "give 2 or more: the first token is prefill, the rest are decode",
        )
    data = safe_yaml.read(file, "suites file")
    out = []
    for suite in names:
        if suite not in data:
            raise SeatError(f"no suite {suite!r}", f"suites: {', '.join(data)}")
        spec = data[suite]
        for name in spec["prompts"]:
            text, digest = load_prompt(name, file.parent / "prompts")
            text = spec.get("instruction", "") + text * spec.get("repeat", 1)
            base = Prompt(suite, name, spec["content"], text, digest, max_tokens or spec["max_tokens"])
            if "contexts" not in spec:
                out.append(base)
                continue
            for context in contexts if contexts is not None else spec["contexts"]:
                for kind in spec["padding"] if context else [None]:
                    label = f"ctx {_label(context)}" + (f" {kind}" if kind else "")
                    out.append(
                        replace(
                            base,
                            suite=f"{suite} {label}",
                            context=context,
                            padding=kind,
                            name=f"{name}@{label.replace(' ', '-')}",
                        )
                    )
    return out
