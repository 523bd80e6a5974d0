"""Strict grammars for values that reach a rendered file or a command line.

Each is a POSIX extended regular expression over ASCII, so Python (`re.fullmatch`) and the rendered
bash (`[[ $value =~ ^(...)$ ]]` under LC_ALL=C) accept exactly the same values. None admits a
leading '-', whitespace, quotes, `$`, backticks or globs.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

PROFILE_NAME = r"[a-z0-9][a-z0-9._-]*"
CONTAINER_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_COMPONENT = r"[a-z0-9]+([._-]+[a-z0-9]+)*"
IMAGE_NAME = rf"([A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]+)?/)?{_COMPONENT}(/{_COMPONENT})*"
IMAGE_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
DIGEST = r"sha256:[0-9a-f]{64}"
IMAGE = rf"{IMAGE_NAME}(:{IMAGE_TAG})?(@{DIGEST})?"
HOST = r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*"
PORT = r"[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]"
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9._+-]*"
RELATIVE_FILE = rf"{_SEGMENT}(/{_SEGMENT})*"  # a file inside a model folder ('..' refused apart)
CONTAINER_PATH = rf"(/{_SEGMENT})+"
SERVED_NAME = r"[A-Za-z0-9_][A-Za-z0-9._/:@+-]*"
KEY = r"[a-z0-9_]+"
REQUIREMENT = r"[A-Za-z0-9][A-Za-z0-9._+=<>!~,\[\]-]*"  # a pip requirement, never a pip option
PROGRAM = rf"/?{_SEGMENT}(/{_SEGMENT})*"
VERSION = r"[0-9][A-Za-z0-9.+!_-]*"


def matches(grammar: str, value: str) -> bool:
    return re.fullmatch(f"({grammar})", value, flags=re.ASCII) is not None


def _rule(grammar: str, what: str):
    def check(value: str) -> str:
        if not matches(grammar, value):
            raise ValueError(f"must be {what}, got {value!r}")
        return value

    return AfterValidator(check)


def _no_dot_dot(value: str) -> str:
    if ".." in value.split("/"):
        raise ValueError(f"must stay inside the folder, got {value!r}")
    return value


def _text(value: str) -> str:
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
        raise ValueError(f"must be one line of text without control characters, got {value!r}")
    return value


def _host_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"must be an absolute path, got {value!r}")
    if set(value) & {":", ","} or "\0" in value:
        raise ValueError(f"must not hold ':', ',' or NUL (docker mounts cannot take them), got {value!r}")
    return value


ProfileName = Annotated[str, _rule(PROFILE_NAME, "a profile name: [a-z0-9][a-z0-9._-]*")]
ContainerName = Annotated[str, _rule(CONTAINER_NAME, "a container name: [A-Za-z0-9][A-Za-z0-9_.-]*")]
ImageName = Annotated[str, _rule(IMAGE_NAME, "an image name (lowercase repository path)")]
ImageTag = Annotated[str, _rule(IMAGE_TAG, "an image tag: [A-Za-z0-9_][A-Za-z0-9_.-]*")]
Host = Annotated[str, _rule(HOST, "an IP address or a host name")]
ModelFile = Annotated[
    str,
    _rule(
        RELATIVE_FILE,
        "a relative file name of letters, digits and ._+- (no quotes, spaces, $, backticks or newlines)",
    ),
    AfterValidator(_no_dot_dot),
]
ContainerPath = Annotated[str, _rule(CONTAINER_PATH, "an absolute path of letters, digits and ._+-")]
HostPath = Annotated[str, AfterValidator(_host_path)]
ServedName = Annotated[str, _rule(SERVED_NAME, "a model name of letters, digits and ._/:@+-")]
Key = Annotated[str, _rule(KEY, "lowercase letters, digits and _")]
Requirement = Annotated[str, _rule(REQUIREMENT, "a pip requirement such as name==1.0 (no options)")]
Program = Annotated[str, _rule(PROGRAM, "a program name or path (no leading '-')")]
Version = Annotated[str, _rule(VERSION, "a version such as 1.2.3+cpu")]
Text = Annotated[str, AfterValidator(_text)]
