"""The preflight checks a launch spec lists. Each kind is written once, in bash
(templates/preflight.sh.j2): the rendered script runs it, and so does `seat up` (preflight.py); a
kind the template lacks is an error, not a check that silently passes."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from seatkit.serve.words import Word


class Kind(StrEnum):
    VENV = "venv"
    RESERVED_PORT = "reserved-port"
    PORT_FREE = "port-free"
    RESERVED_NAME = "reserved-name"
    CONTAINER_FREE = "container-free"
    IMAGE = "image"
    PINNED = "pinned"
    CACHE = "cache"
    EXISTS = "exists"
    DIR = "dir"
    FILE = "file"
    SHARDS = "shards"
    SIZES = "sizes"
    GPUS = "gpus"
    API_KEY = "api-key"


@dataclass(frozen=True)
class Check:
    """One preflight check of a subject (a word that may hold knobs)."""

    kind: Kind
    subject: Word = ()
    label: str = ""
    values: tuple = ()
    hint: str = ""  # what to do when it fails, where the kind alone cannot say
