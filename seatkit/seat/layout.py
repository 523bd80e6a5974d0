"""The SEAT_HOME layout: every file and folder the kit keeps there, named in one place."""

from __future__ import annotations

from pathlib import Path

from seatkit.paths import seat_home


def run_records() -> Path:
    """What `seat up` started: one record per profile."""
    return seat_home() / "run"


def run_record(profile: str) -> Path:
    return run_records() / f"{profile}.json"


def seat_log(profile: str) -> Path:
    return seat_home() / "logs" / f"{profile}.log"


def setup_log(name: str) -> Path:
    return seat_home() / "logs" / f"setup-{name}.log"


def base_log(tag: str) -> Path:
    return seat_home() / "logs" / f"base-{tag.replace('/', '_').replace(':', '_')}.log"


def venv(name: str) -> Path:
    return seat_home() / "venvs" / name


def venv_record(venv_dir: Path) -> Path:
    """What `seat setup` installed in a venv (serve.venv_lock): beside the venv, not in it, so no
    install through the venv rewrites it."""
    return venv_dir.with_name(f"{venv_dir.name}.dists.json")


def model(build: str) -> Path:
    return seat_home() / "models" / build


def model_verified(profile: str) -> Path:
    """When each model file was last hashed in full, and what it resolved to then. Not under
    models/, which a test's SEAT_HOME shares with the user's: `seat setup` trusts this record."""
    return seat_home() / "verified" / f"{profile}.json"


def downloads() -> Path:
    return seat_home() / "downloads"


def keys(profile: str) -> Path:
    return seat_home() / "keys" / profile


def build_records() -> Path:
    """What `seat build` made here: an image id and the pins it was built from, per tag."""
    return seat_home() / "builds"


def wheelhouse(key: str) -> Path:
    return seat_home() / "wheelhouse" / key


def docker_demo() -> Path:
    return seat_home() / "docker-demo"
