"""The schema of a bench summary's figures: `seat bench run` writes its suites through it, and
`compare` and doctor read a summary back through it, so a figure or spread that is NaN, negative or
text is refused naming the field, never turned into a verdict."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, RootModel

from seatkit.errors import SeatError
from seatkit.validation import validate


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("not a finite number")
    return value


Number = Annotated[float, Field(ge=0), AfterValidator(_finite)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class Stats(_Strict):
    median: Number
    min: Number
    max: Number
    cv: Number | None  # relative standard deviation; None when the mean is 0
    n: Annotated[int, Field(ge=1)]


class Suite(_Strict):
    model_config = ConfigDict(extra="allow")  # per-prompt tables and the best run ride along
    content: Literal["code", "prose"]
    requests: Annotated[int, Field(ge=0)] = 0
    context: Annotated[int, Field(ge=0)] = 0
    padding: Literal["repetitive", "realistic"] | None = None
    output_tokens: Annotated[int, Field(ge=1)] | None = None
    decode_tok_s: Stats | None = None
    tokens_per_step: Stats | None = None
    ms_per_step: Stats | None = None
    drafter_tokens_per_step: Stats | None = None
    draft_acceptance: Stats | None = None
    accepted_per_drafted_step: Stats | None = None
    ttft_ms: Stats | None = None
    client_ttft_ms: Stats | None = None
    prefill_tok_s: Stats | None = None
    warm_ttft_ms: Stats | None = None
    drafted_tokens_per_step: Stats | None = None
    no_draft_share: Stats | None = None
    acceptance_by_position: list[Number] = []


class Sampling(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    temperature: Number | None = None


class Conditions(BaseModel):
    """The fields compare pairs by; the rest of a run's conditions ride along unchecked."""

    model_config = ConfigDict(strict=True, extra="allow")
    model: str
    base_model: str | None = None
    draft_model: str | None = None
    draft_method: str | None = None
    k: Annotated[int, Field(ge=0)] | None = None
    draft_policy: str | None = None
    sampling: Sampling
    host_settings: str | None = None
    image: str | None = None
    image_labels: dict[str, str] | None = None
    runtime: str | None = None
    b12x_kernels: str | None = None
    model_locks: dict[str, str] | None = None


class Summary(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    schema_: str | None = Field(None, alias="schema")
    conditions: Conditions
    suites: dict[str, Suite]


class Suites(RootModel[dict[str, Suite]]):
    pass


def check_suites(suites: dict, where: str) -> dict:
    """The suites a run computed, once each figure passed the schema."""
    validate(
        Suites,
        suites,
        where,
        "bench summary",
        "a figure the run computed is not a number; its requests.jsonl holds every request",
    )
    return suites


def check(data, where: str) -> dict:
    """A summary read back (safe_yaml.read_json), checked field by field."""
    if not isinstance(data, dict):
        raise SeatError(
            f"{where} is not a bench summary: not a mapping of fields",
            "give the folder of a finished `seat bench run`",
        )
    validate(
        Summary,
        data,
        where,
        "bench summary",
        "give the folder of a finished `seat bench run`, or run it again",
    )
    return data
