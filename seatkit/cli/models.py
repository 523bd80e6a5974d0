"""`seat model lock | verify | fetch`: the model weights pinned by profiles/NAME.models.lock."""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

from seatkit.cli import output
from seatkit.cli.app import err, out
from seatkit.cli.arguments import PROFILE
from seatkit.models import fetch, lock, verify
from seatkit.seat import profiles

WORKERS = click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=None,
    help="Files hashed at once (default: the CPUs this process may use).",
)


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.2f} MB"


@contextmanager
def byte_progress(what: str, total: int):
    """A callback counting hashed bytes: a bar in a terminal, a line per tenth outside one."""
    if err.is_terminal:
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=err,
        ) as bar:
            task = bar.add_task(what, total=total)
            yield lambda n: bar.advance(task, n)
        return
    state = {"done": 0, "next": 0.1}
    guard = threading.Lock()

    def advance(n: int) -> None:
        with guard:
            state["done"] += n
            share = state["done"] / total if total else 1.0
            if share >= state["next"]:
                err.print(f"{what}: {int(share * 100)} % of {_size(total)}", highlight=False)
                state["next"] = int(share * 10 + 1e-9) / 10 + 0.1

    err.print(f"{what}: {_size(total)} to hash", highlight=False)
    yield advance


@click.group("model")
def model_group():
    """Model weights pinned file by file (profiles/PROFILE.models.lock): lock, verify, fetch."""


@model_group.command("lock")
@click.argument("profile", metavar="PROFILE")
@WORKERS
def lock_cmd(profile: str, workers: int | None):
    """Hash every file of each model folder into profiles/PROFILE.models.lock.

    Records each file's path, size and SHA-256, the hub repository and revision (the profile's, or
    the commit `hf download` noted beside the files), and one aggregate hash per model."""
    prof = profiles.load(profile)
    with byte_progress(f"hashing {prof.name}'s models", lock.total_bytes(prof)) as advance:
        made = lock.make(prof, advance, workers)
    path = lock.write(prof, made)
    for key, pinned in made.items():
        out.print(
            f"{key}: {len(pinned.files)} files, {_size(pinned.size)}, sha256 {pinned.sha256[:16]}, "
            f"revision {pinned.revision or 'unknown'}",
            highlight=False,
        )
    out.print(f"wrote {path}")


def _report(result: dict, as_json: bool) -> None:
    output.emit(result, as_json, _show_models)
    sys.exit(0 if result["ok"] else 1)


def _show_models(result: dict) -> None:
    for key, m in result["models"].items():
        out.print(f"{key}: {m['dir']}: {verify.summary(m)}", highlight=False)
        for kind in ("missing", "changed", "extra"):
            for name in m[kind][:20]:
                out.print(f"  {kind}: {name}", highlight=False)


@model_group.command("verify")
@PROFILE
@click.option(
    "--sizes-only", is_flag=True, help="Compare sizes alone (what preflight does): seconds, not minutes."
)
@WORKERS
@output.json_option("the result")
def verify_cmd(profile: str, sizes_only: bool, workers: int | None, as_json: bool):
    """Compare each model folder with the lock: missing, changed and extra files (exit 1 on any).

    Hashes files in parallel; a full verify is recorded for `seat doctor`."""
    prof = profiles.load(profile)
    if sizes_only:
        _report(verify.verify(prof, full=False), as_json)
    with byte_progress(f"verifying {prof.name}'s models", verify.bytes_to_hash(prof)) as advance:
        result = verify.verify(prof, full=True, workers=workers, on_bytes=advance)
    _report(result, as_json)


@model_group.command("fetch")
@PROFILE
@WORKERS
@output.json_option("the verification")
def fetch_cmd(profile: str, workers: int | None, as_json: bool):
    """Download each model with `hf download REPO --revision REV --local-dir DIR`, then verify it.

    Needs huggingface_hub's `hf` on PATH and the revision in the profile or its lock."""
    prof = profiles.load(profile)
    fetch.download(prof, say=lambda m: err.print(m, highlight=False, markup=False))
    with byte_progress(f"verifying {prof.name}'s models", verify.bytes_to_hash(prof)) as advance:
        result = verify.verify(prof, full=True, workers=workers, on_bytes=advance)
    _report(result, as_json)
