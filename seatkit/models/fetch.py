"""`seat model fetch`: download each model with huggingface_hub's own CLI, then verify the lock.

    hf download REPO --revision REV --local-dir DIR

The kit forms the command and checks the result; it does not download anything itself.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

from seatkit.errors import SeatError
from seatkit.models import verify as verifier
from seatkit.models.lock import ModelLock, model_dir
from seatkit.seat.profiles import Profile


def argv(repository: str, revision: str, local_dir: str) -> list[str]:
    return ["hf", "download", repository, "--revision", revision, "--local-dir", local_dir]


def plan(profile: Profile, locks: dict[str, ModelLock]) -> list[tuple[str, list[str]]]:
    """(model, argv) for each model the hub serves; built models are made by `seat setup`."""
    out = []
    for key, model in profile.models.items():
        if model.build:
            continue
        lock = locks[key]
        repository = model.repository or lock.repository
        revision = model.revision or lock.revision
        if not repository or not revision:
            raise SeatError(
                f"model {key} has no hub {'repository' if not repository else 'revision'} "
                "in the profile or the lock",
                "name models.<key>.repository and revision in the profile (a commit id)",
            )
        out.append((key, argv(repository, revision, str(model_dir(profile, key)))))
    return out


def download(profile: Profile, say: Callable[[str], None] = print) -> None:
    """Run `hf download` for each hub model of the profile, at the pinned revision."""
    locks = verifier.require_lock(profile)
    commands = plan(profile, locks)
    if not commands:
        raise SeatError(
            f"profile {profile.name} has no hub models to fetch",
            f"its models are built locally: seat setup {profile.name}",
        )
    if shutil.which("hf") is None:
        raise SeatError(
            "`hf` (huggingface_hub's command line) is not on PATH",
            "pip install -U huggingface_hub, then run `seat model fetch` again",
        )
    for key, command in commands:
        say(f"{key}: {' '.join(command)}")
        done = subprocess.run(command)
        if done.returncode:
            raise SeatError(
                f"hf download of model {key} failed (exit {done.returncode})",
                "see its output above; `hf auth login` if the repository needs a token",
            )


def fetch(
    profile: Profile, say: Callable[[str], None] = print, workers: int | None = None, on_bytes=None
) -> dict:
    """Download, then verify every file against the lock (recorded like any full verify)."""
    download(profile, say)
    say("verifying every file against the lock")
    return verifier.verify(profile, full=True, workers=workers, on_bytes=on_bytes)
