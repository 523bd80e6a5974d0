"""`seat overlay fetch | verify | lock`: the overlay pinned by overlay/overlay.lock."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from seatkit.cli import output
from seatkit.cli.app import err, out
from seatkit.errors import SeatError
from seatkit.image import build, overlay, vouch
from seatkit.seat import overlay_lock, profiles


@click.group("overlay")
def overlay_group():
    """The overlay layered onto the base image, pinned file by file (overlay/overlay.lock)."""


@overlay_group.command("fetch")
@click.option("--lock", "lock_path", default=str(overlay_lock.LOCK), show_default=True, type=click.Path())
@click.option("--dest", default=str(overlay.FETCHED), show_default=True, type=click.Path())
@click.option(
    "--from",
    "source",
    metavar="URL_OR_PATH",
    help="Fetch the same commit from a mirror (https URL) or a local clone instead of the "
    "lock's source; the checks are the same, so it need not be trusted.",
)
def fetch_cmd(lock_path: str, dest: str, source: str | None):
    """Clone exactly the locked commit, check its tree id (git's hash of every file), then move it into place."""
    lock = overlay_lock.load(Path(lock_path))
    with err.status(f"fetching {source or lock.source}@{lock.commit[:12]}:{lock.path}"):
        where = overlay.fetch(lock, Path(dest), source)
    out.print(f"{len(lock.files)} files verified and placed in {where}")


@overlay_group.command("verify")
@click.argument("directory", required=False, type=click.Path())
@click.option("--image", help="Check the overlay installed in this image.")
@click.option("--container", help="Check the overlay installed in this (running or stopped) container.")
@click.option(
    "--dir",
    "inside",
    help="The vllm package inside the image or container "
    "(default: where `seat build` put it, as recorded in SEAT_HOME, else the vLLM image's "
    "site-packages; never where the image itself says).",
)
@click.option("--lock", "lock_path", default=str(overlay_lock.LOCK), show_default=True, type=click.Path())
@click.option(
    "--profile",
    help="With --image: the check `seat up` makes for this profile's seat instead: whether the "
    "image is the one `seat build` recorded from the pins in force.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Fail on extra files and __pycache__ folders too (an "
    "installed package has many). Symlinks always fail.",
)
@output.json_option("the result")
def verify_cmd(
    directory: str | None,
    image: str | None,
    container: str | None,
    inside: str | None,
    lock_path: str,
    profile: str | None,
    strict: bool,
    as_json: bool,
):
    """Compare installed files with the lock: missing, changed and extra files, symlinks, caches.

    DIRECTORY defaults to the fetched overlay (overlay/vllm)."""
    if sum(x is not None for x in (directory, image, container)) > 1:
        raise click.UsageError("give one of DIRECTORY, --image, --container")
    lock = overlay_lock.load(Path(lock_path))
    where = image or container
    if profile:
        if image is None or inside:
            raise click.UsageError("--profile checks an --image, as `seat up` does (no --dir)")
        runs, why = vouch.image_check(profiles.load(profile), image)
        output.emit({"verified": why is None, "image_id": runs, "why": why}, as_json, _show_verdict)
        sys.exit(0 if why is None else 1)
    if where is not None:
        problems = build.verify_installed(where, inside, is_container=bool(container), lock=lock)
    else:
        problems = overlay.verify(_fetched(directory, lock_path), lock)
    output.emit(problems, as_json, _show_problems)
    failed = (
        problems["missing"]
        or problems["changed"]
        or problems["links"]
        or (strict and (problems["extra"] or problems["caches"]))
    )
    sys.exit(1 if failed else 0)


def _fetched(directory: str | None, lock_path: str) -> Path:
    """The fetched overlay to verify; a SeatError that says how to fetch it when it is not there."""
    folder = Path(directory or overlay.FETCHED)
    if not folder.is_dir():
        fetch = "seat overlay fetch" + (f" --lock {lock_path}" if lock_path != str(overlay_lock.LOCK) else "")
        raise SeatError(
            f"no overlay to verify at {folder}: "
            + ("it was never fetched" if not folder.exists() else "it is not a directory"),
            f"{fetch} clones the locked commit there"
            + ("" if directory is None else f" (with --dest {directory})"),
        )
    return folder


def _show_verdict(found: dict) -> None:
    said = found["why"] or f"{found['image_id']} is the image `seat build` recorded from the pins in force"
    out.print(("verified: " if found["verified"] else "NOT verified: ") + said, highlight=False)


def _show_problems(problems: dict[str, list[str]]) -> None:
    for kind, names in problems.items():
        out.print(
            f"{kind}: {len(names)}"
            + "".join(f"\n  {n}" for n in names[:20])
            + (f"\n  … {len(names) - 20} more" if len(names) > 20 else ""),
            highlight=False,
        )


@overlay_group.command("lock")
@click.option("--from", "source_dir", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--source", required=True, help="URL@COMMIT the directory came from.")
@click.option(
    "--path",
    "path_in_repo",
    default="overlay/vllm",
    show_default=True,
    help="The directory's path inside that repository.",
)
@click.option("--out", "out_path", default=str(overlay_lock.LOCK), show_default=True, type=click.Path())
def lock_cmd(source_dir: str, source: str, path_in_repo: str, out_path: str):
    """Pin another overlay: every file's SHA-256 and the git tree id of the directory."""
    lock = overlay.lock_from(Path(source_dir), source, path_in_repo)
    Path(out_path).write_text(lock.dump())
    out.print(f"pinned {len(lock.files)} files, tree {lock.tree}, into {out_path}")
