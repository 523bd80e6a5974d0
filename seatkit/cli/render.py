"""`seat render | lint`: write the files a profile describes, and check its flags with vLLM's parser."""

from __future__ import annotations

import sys

import click
from rich.table import Table

from seatkit.cli import output, reference
from seatkit.cli.app import out
from seatkit.cli.arguments import PROFILE
from seatkit.seat import profiles
from seatkit.serve import lint, render


@click.command("render")
@click.option(
    "--check",
    is_flag=True,
    help="Change nothing; exit 1 when a committed file differs from a fresh render, and show the difference.",
)
def render_cmd(check: bool):
    """Render serve/<profile>.sh for every profile, and docker-compose.yml, .env and
    LAUNCH_CONFIG.md for the default profile; rewrite docs/commands.md's command table from this help and
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


@click.command("lint")
@PROFILE
@click.option(
    "--python",
    help="Python of a venv with vLLM to check with (default: the profile's own runtime, else cpu-smoke's).",
)
@output.json_option("the findings")
def lint_cmd(profile: str, python: str | None, as_json: bool):
    """Check the profile's vLLM flags and speculative config with a real vLLM parser.

    Unknown flags, bad choices and speculative-config keys the engine rejects are errors, unless
    the profile declares them fork-only (known to the b12x fork alone).
    """
    prof = profiles.load(profile)
    findings = lint.lint(prof, python)
    errors = [f for f in findings if not f.fork_only]
    found = [{**f.__dict__, "verdict": f.verdict} for f in findings]
    output.emit(found, as_json, lambda data: _show_findings(prof, findings, len(errors)))
    sys.exit(1 if errors else 0)


def _show_findings(prof: profiles.Profile, findings: list[lint.Finding], errors: int) -> None:
    table = Table("verdict", "kind", "name", "stage", "message", title=f"seat lint {prof.name}")
    for f in findings:
        table.add_row(f.verdict, f.kind, f.name, f.stage, f.message)
    if findings:
        output.show_table(out, table)
    out.print(
        f"{errors} error(s), {len(findings) - errors} fork-only; "
        f"{len(lint.server_argv(prof))} arguments checked"
    )
