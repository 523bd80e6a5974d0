"""`seat setup | up | down | status | logs`: run a seat and look at it."""

from __future__ import annotations

import sys
import textwrap

import click
from rich.markup import escape

from seatkit import when
from seatkit.cli import output
from seatkit.cli.app import err, out
from seatkit.cli.arguments import PROFILE
from seatkit.cli.progress import progress
from seatkit.errors import NotRunning, SeatError
from seatkit.image import prebuilt, vouch
from seatkit.models import verify
from seatkit.seat import layout, profiles, what_runs
from seatkit.serve import launch, runtime
from seatkit.serve.spec import LaunchSpec, build
from seatkit.text import plain


def _spec(name: str) -> LaunchSpec:
    return build(profiles.load(name))


@click.command("setup")
@click.argument("profile", default=profiles.EMBEDDED_DEFAULT, metavar="[PROFILE]")
def setup_cmd(profile: str):
    """Make a native profile's runtime venv and build its local models (idempotent)."""
    with progress(err, f"setup {profile}") as update:
        made = runtime.setup(profiles.load(profile), say=update)
    for what, path in made.items():
        out.print(f"{what}: {path}")


@click.command("up")
@PROFILE
@click.option(
    "--verify-models",
    is_flag=True,
    help="Hash every model file against the models lock first (preflight always compares their sizes).",
)
def up_cmd(profile: str, verify_models: bool):
    """Preflight, start the seat, and wait until /health and /v1/models answer.

    An image built elsewhere (image.compare_overlay) runs by its pinned digest, and its vllm package
    is first compared with the overlay lock: differences are printed as facts, not failures."""
    spec = _spec(profile)
    if verify_models:
        verify.require_match(spec.profile)
    if spec.profile.image and spec.profile.image.compare_overlay:
        with progress(err, f"comparing {profile}'s image with the overlay lock"):
            found = prebuilt.compare(spec.profile, image=spec.values()["SEAT_IMAGE"])
        for line in prebuilt.facts(found):
            out.print(f"fact: {line}", highlight=False)
    click.echo(spec.config_line(spec.values()), err=True)
    experiment = what_runs.mark({"differs": what_runs.differs(spec.profile)})  # what it sets off the list
    if experiment:
        said = what_runs.marked("this seat is an experiment:", experiment)
        err.print(f"[yellow]warning:[/] {escape(said)}; every result of it is marked so", highlight=False)
    with progress(err, f"up {profile}") as update:
        run, waited = launch.up(
            spec,
            tick=lambda stage, t: update(f"waiting for {stage} ({t:.0f} s)"),
            image_check=vouch.image_check,
        )
    if what_runs.mark(run.conditions()) not in (None, experiment):  # beyond what was warned of above
        said = what_runs.marked("this seat is", what_runs.mark(run.conditions()))
        err.print(f"[yellow]warning:[/] {escape(said)}; every result of it is marked so", highlight=False)
    out.print(
        f"[green]{profile} is up[/] after {waited:.1f} s: {run.url} serves model "
        f"[bold]{escape(run.model)}[/] ({launch.describe(run)})"
    )
    if run.api_key_file:
        out.print(f"API key in {run.api_key_file} (mode 0600)", soft_wrap=True)
    # One command a line: a command broken across lines cannot be pasted.
    out.print("next:")
    for command in (f"curl {run.url}/v1/models", f"seat logs {profile}", f"seat down {profile}"):
        out.print(f"  {escape(command)}", highlight=False, soft_wrap=True)


@click.command("down")
@PROFILE
@click.option(
    "--grace",
    default=30,
    show_default=True,
    type=click.IntRange(0, 3600),
    help="Seconds to wait after SIGTERM, 0 to 3600; then the seat is killed.",
)
def down_cmd(profile: str, grace: int):
    """Stop exactly what `seat up` started (its PID or container id)."""
    try:
        run, was_running = launch.down(
            profiles.name_of(profile), grace, containers=_may_run_in_docker(profile)
        )
    except NotRunning as exc:  # already down: what was asked for holds (exit 0)
        out.print(f"nothing to stop: {escape(exc.message)}", highlight=False)
        return
    if was_running:
        out.print(f"{run.profile} stopped ({launch.describe(run)})")
    else:
        out.print(
            f"{run.profile} had already stopped ({launch.describe(run)}): what was left of it is cleared"
        )


def _may_run_in_docker(profile: str) -> bool:
    """Whether `down` should look for the profile's containers (a native one never asks docker)."""
    try:
        return isinstance(profiles.load(profile), profiles.DockerProfile)
    except SeatError:  # the profile is gone or broken: what it started may be a container
        return True


@click.command("status")
@PROFILE
@output.json_option("the status")
def status_cmd(profile: str, as_json: bool):
    """What `seat up` started for PROFILE, whether it still runs, and its /health answer."""
    name = profiles.name_of(profile)
    info = launch.status(name)
    info.pop("token", None)  # a secret: it proves which `seat up` owns the record
    if info["state"] == "down":
        if not profiles.profile_path(profile).exists():
            # Nothing recorded and no such profile: a typo, not a seat that is down.
            raise SeatError(
                f"no profile {profile!r} and nothing `seat up` started under that name",
                f"profiles: {', '.join(profiles.profile_names())}",
            )
        profiles.load(profile)  # a broken profile is said now, not after `seat up` is suggested
    given = click.get_current_context().get_parameter_source("profile") != click.core.ParameterSource.DEFAULT
    output.emit(info, as_json, lambda data: _show_status(data, profile, given))


def _show_status(info: dict, profile: str, given: bool = True) -> None:
    shown = _readable(info)
    width = max(map(len, shown))
    room = max(out.width - width - 2, 20)
    for key, value in shown.items():
        # A value that wraps (a hash, a path) goes on under itself, never under the labels.
        lines = textwrap.wrap(value, room, break_on_hyphens=False) or [""]
        said = f"\n{' ' * (width + 2)}".join(lines)
        out.print(
            f"{key:>{width}}: {said}", markup=False, highlight=False, soft_wrap=True
        )  # ids come from the server
    if info["state"] != "down":
        return
    out.print("not running: nothing `seat up` started is recorded")
    if given:
        out.print(f"next: seat up {escape(profile)}", highlight=False, soft_wrap=True)  # as it was given
        return
    # No profile named: the default needs four GPUs, so the seats this machine runs come first.
    for other in sorted(p.stem for p in layout.run_records().glob("*.json") if p.stem != profile):
        out.print(f"recorded here: {other} (seat status {other})", highlight=False, soft_wrap=True)
    out.print("next, on any machine (the demo's CPU seat):", highlight=False)
    out.print(f"  seat up {profiles.EMBEDDED_DEFAULT}", highlight=False, soft_wrap=True)
    out.print(f"or, on four GPUs: seat up {profile}", highlight=False, soft_wrap=True)


# `seat status` in words, in this order; a field not named here is not for people (--json has it).
LABELS = {
    "profile": "profile",
    "state": "state",
    "runtime": "runtime",
    "ident": "",  # named by the runtime: process id or container
    "url": "address",
    "model": "served model",
    "health": "health",
    "models": "models",
    "unverified": "verified",
    "started": "started",
    "since": "process",
    "log": "log file",
    "nsys": "profiling",
    "profile_source": "profile file",
    "profile_sha256": "profile sha256",
    "model_locks": "model locks",
    "boot": "boot id",
}


def _readable(info: dict) -> dict[str, str]:
    """`seat status` in words: the process id or container named as such, lists as lists, no None."""
    shown = when.readable({**(info.get("provenance") or {}), **info})  # the profile and locks as at `up`
    native = info.get("runtime") == "native"
    out = {}
    for key, label in LABELS.items():
        if shown.get(key, "") == "":  # absent, or never recorded (a record of an older kit)
            continue
        value = shown[key]
        if key == "ident":
            label, value = ("process id", value) if native else ("container", value[:12])
        elif key == "nsys":
            value = "off" if value is None else "nsys " + ", ".join(f"{k}={v}" for k, v in value.items())
        elif key == "unverified":  # as `seat up` recorded it; whether it runs the lock is doctor's to say
            value = (
                ("yes (not an experiment" + (")" if native else ", and its image vouched for)"))
                if value is None
                else f"no, every result is marked ({value})"
            )
        out[label] = plain(value)
    return out


@click.command("logs")
@PROFILE
@click.option(
    "-f", "--follow", is_flag=True, help="Keep printing what the running seat writes (Ctrl-C stops)."
)
def logs_cmd(profile: str, follow: bool):
    """Print the server's output; with -f, follow it, as `docker logs -f` does."""
    name = profiles.name_of(profile)
    run = launch.recorded(name)
    if run is None:  # stopped: `seat down` left its log where `seat up` wrote it
        saved = launch.log_path(name)
        if not saved.exists():
            raise SeatError(
                f"{profile} has no log on this machine: it was never started by `seat up` here",
                f"seat up {profile}",
            )
        if follow:
            err.print(f"{profile} is not running: its last log, {saved}, has nothing more to follow")
        with saved.open("rb") as fh:
            while chunk := fh.read(65536):
                sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        return
    for chunk in launch.logs(run, follow):
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
