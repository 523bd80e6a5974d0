"""The value types of a profile's fields: text that can land in argv, bash, compose and docker
unescaped, and the shared strictness of every section."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def _no_nul(value: str) -> str:
    """A value that reaches argv or the environment: execve and bash cannot carry a NUL byte."""
    if "\x00" in value:
        raise ValueError(f"must not hold a NUL byte, got {value!r}")
    return value


def _env_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ValueError(f"must be an environment variable name, got {value!r}")
    return value


def _flag_name(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*(=[^=]+)?", value) or value.startswith("-"):
        raise ValueError(f"must be a vLLM flag without its leading dashes, got {value!r}")
    return value


def _plain(value: str) -> str:
    """Text that means the same in bash, compose and docker: no quotes, $, backticks, backslashes
    or control characters, so it can land anywhere without an escape going wrong."""
    if not value or re.search(r"[\x00-\x1f\x7f'\"`$\\]", value):
        raise ValueError(
            f"must be non-empty plain text without quotes, $, backticks, backslashes "
            f"or newlines, got {value!r}"
        )
    return value


def _mount_path(value: str) -> str:
    if not PurePosixPath(_plain(value)).is_absolute():
        raise ValueError(f"must be an absolute path, got {value!r}")
    if set(value) & {":", ","} or ".." in PurePosixPath(value).parts:
        raise ValueError(f"must be an absolute path without ':', ',' or '..' (docker mounts), got {value!r}")
    return "/" + "/".join(
        PurePosixPath(value).parts[1:]
    )  # one spelling: '/cache/.' and '//cache' are '/cache'


def overlaps(a: str, b: str) -> bool:
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def _upper_env_name(value: str) -> str:
    if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", value):
        raise ValueError(f"must be an environment variable name ([A-Z_][A-Z0-9_]*), got {value!r}")
    return value


PlainText = Annotated[str, AfterValidator(_plain)]
# Any text bash and compose can quote, but not NUL: no process environment can carry it.
EnvValue = Annotated[str, AfterValidator(_no_nul)]
MountPath = Annotated[str, AfterValidator(_mount_path)]
UpperEnvName = Annotated[str, AfterValidator(_upper_env_name)]
EnvName = Annotated[str, AfterValidator(_env_name)]
FlagName = Annotated[str, AfterValidator(_flag_name)]
Port = Annotated[int, Field(ge=1, le=65535)]
Scalar = str | bool | int | float
# Docker's own set of ulimit names (docker run --ulimit, compose ulimits).
UlimitName = Literal[
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
