"""The preflight checks a launch spec lists. Each kind has one implementation in Python
(preflight.py, for `seat up`) and one in bash (templates/preflight.sh.j2, for the script); a kind
either lacks is an error, not a check that silently passes."""

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

    def __post_init__(self) -> None:
        # A kind given by its name becomes the member; a misspelt one is refused here, never skipped.
        object.__setattr__(self, "kind", Kind(self.kind))
