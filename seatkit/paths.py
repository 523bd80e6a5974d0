"""Where the kit finds its data and keeps its state."""

import os
from pathlib import Path

# The checkout (or installed tree) that holds profiles/, serve/, bench/ ...
REPO = Path(os.environ.get("SEAT_REPO", Path(__file__).resolve().parent.parent))
PROFILES = REPO / "profiles"


def seat_home() -> Path:
    """State that outlives one command: runtimes, built models, what `up` started. Absolute even
    when set relative: a container mounts its models from here, and docker takes no relative path."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "seatkit"
    return Path(os.environ.get("SEAT_HOME", default)).absolute()
