"""Data files validated on load, with every bad field named: the file, the field, what was expected."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from seatkit.errors import SeatError

Model = TypeVar("Model", bound=BaseModel)


def describe(error: ErrorDetails) -> str:
    field = ".".join(str(p) for p in error["loc"] if p != "[key]") or "(top level)"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown field"
    elif error["type"] not in ("missing", "value_error"):
        message += f" (got {error['input']!r})"
    return f"field '{field}': {message}"


def validate(model: type[Model], data: dict, path: Path | str, what: str, hint: str, via: str = "") -> Model:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "\n".join(f"  {describe(e)}" for e in exc.errors(include_url=False))
        raise SeatError(f"{path}{via}: invalid {what}\n{problems}", hint) from None
