"""The one door to the host: every file through a root prefix, every command through one runner.

Tests point the root at a fixture tree and give a runner with canned answers, so the whole of
seatkit/host runs against fake hosts without touching this one.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

Runner = Callable[[list[str]], tuple[int, str]]


def run_real(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    return done.returncode, done.stdout


@dataclass
class System:
    root: Path = Path("/")
    runner: Runner = field(default=run_real)

    def path(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def read(self, path: str) -> str | None:
        try:
            return self.path(path).read_text(errors="replace")
        except OSError:
            return None

    def entries(self, path: str) -> list[str] | None:
        """Names in a directory, sorted; None when it does not exist."""
        try:
            return sorted(p.name for p in self.path(path).iterdir())
        except OSError:
            return None

    def glob(self, pattern: str) -> list[Path]:
        return sorted(self.root.glob(pattern.lstrip("/")))

    def run(self, argv: list[str]) -> tuple[int, str]:
        return self.runner(argv)
