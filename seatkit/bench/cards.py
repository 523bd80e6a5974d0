"""Reference cards (bench/references/*.yaml): published figures with units, conditions and sources.

A card's field names carry their units (`_tok_s`, `_ms`, `_s`, `_per_step`, fractions for
acceptance). A figure's conditions are the card's, overridden by its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from seatkit import paths, safe_yaml
from seatkit.errors import SeatError
from seatkit.validation import validate

REFERENCES = paths.REPO / "bench" / "references"
Positive = Annotated[float, Field(gt=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Conditions(Strict):
    model: str | None = None
    draft: str | None = None
    k: Annotated[int, Field(ge=0, le=16)] | None = None
    draft_policy: str | None = None
    content: Literal["code", "prose"] | None = None
    context: Annotated[int, Field(ge=0)] | None = None
    padding: Literal["repetitive", "realistic"] | None = None
    prompt: str | None = None
    output_tokens: Annotated[int, Field(gt=0)] | None = None
    temperature: Annotated[float, Field(ge=0)] | None = None
    host_settings: str | None = None
    image: str | None = None
    b12x_kernels: str | None = None
    statistic: str | None = None


class Harness(Strict):
    """The tool that produced a card's figures, and how: compare matches the kit's figure to it."""

    tool: str
    version: str | None = None
    mode: str  # e.g. "sustained" (llm_decode_bench), "per-request"
    concurrency: Annotated[int, Field(ge=1)] = 1
    statistic: str | None = None


class Figure(Strict):
    id: str
    what: str
    source: str
    conditions: Conditions = Conditions()
    harness: Harness | None = None  # the card's, unless this figure came from another tool
    decode_tok_s: Positive | None = None
    tokens_per_step: Annotated[float, Field(ge=1)] | None = None
    ms_per_step: Positive | None = None
    ms_per_step_before: Positive | None = None
    accepted_per_step: Annotated[float, Field(ge=0)] | None = None
    draft_acceptance: Fraction | None = None
    acceptance_by_position: list[Fraction] | None = None
    prefill_tok_s: Positive | None = None
    ttft_ms: Positive | None = None
    prefill_tok_s_by_context: dict[int, Positive] | None = None
    ttft_s_by_context: dict[int, Positive] | None = None
    prefill_s: dict[str, Positive] | None = None
    ttft_s: dict[str, Positive] | None = None
    first_token_fixed_ms: dict[str, Positive] | None = None
    marginal_prefill_tok_s: dict[str, Positive] | None = None
    repeats: dict[str, list[Positive]] = {}
    range: dict[str, Annotated[list[Positive], Field(min_length=2, max_length=2)]] = {}

    @model_validator(mode="after")
    def _has_a_number(self):
        numbers = self.model_dump(
            exclude={"id", "what", "source", "conditions", "harness", "repeats", "range"}, exclude_none=True
        )
        if not numbers:
            raise ValueError("a figure needs at least one value")
        for field in (*self.repeats, *self.range):
            if field not in numbers:
                raise ValueError(f"repeats/range given for {field!r}, which has no value")
        return self


class Card(Strict):
    source: str
    conditions: Conditions
    harness: Harness | None = None
    rig: dict[str, str] = {}
    figures: list[Figure] = Field(min_length=1)
    name: str = ""

    @model_validator(mode="after")
    def _unique_ids(self):
        ids = [f.id for f in self.figures]
        if len(ids) != len(set(ids)):
            raise ValueError(f"figure ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
        return self

    def conditions_of(self, figure: Figure) -> dict:
        return {**self.conditions.model_dump(), **figure.conditions.model_dump(exclude_none=True)}


def find(name: str | Path) -> Path:
    """A card by every form the help shows: NAME, NAME.yaml, bench/references/NAME[.yaml] (from
    any folder), or a path to a YAML file."""
    path = Path(name)
    for candidate in (path, path.with_name(path.name + ".yaml")):
        if candidate.is_file():
            return candidate
    shipped = REFERENCES / (path.name if path.suffix == ".yaml" else f"{path.name}.yaml")
    if path.parent in (Path("."), Path("bench/references")) or path.parent == REFERENCES:
        return shipped
    return path


def load(path: str | Path) -> Card:
    path = find(path)
    try:
        data = safe_yaml.read(path, "reference card")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        known = ", ".join(p.stem for p in sorted(REFERENCES.glob("*.yaml")))
        raise SeatError(f"no reference card at {path}", f"cards: {known}") from None
    if not isinstance(data, dict):
        raise SeatError(f"{path}: a card is a mapping of fields")
    return validate(
        Card,
        {**data, "name": path.stem},
        path,
        "reference card",
        "fix the fields named above; bench/references/ holds working cards",
    )
