"""The `seat` command: thin wrappers that call the library and format what it returns."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from seatkit.bench import (compare, parity, report, run as bench_run, selftest, target as bench_target,
                           workload)
from seatkit.errors import SeatError
from seatkit.serve import demo, launch, lint, profile as profiles, render, runtime, spec as specs

out = Console()
err = Console(stderr=True)
PROFILE = click.argument("profile", default=profiles.DEFAULT_PROFILE, metavar="[PROFILE]")


def _spec(name: str) -> specs.LaunchSpec:
    return specs.build(profiles.load(name))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="seatkit")
def seat():
    """Reproduce one fast LLM serving seat and explain its numbers.

    PROFILE is a name from profiles/ (or a path to a YAML file). Without one, commands use the
    original seat, dsv4-flash-dspark-tp4; `seat demo` uses the CPU-only cpu-smoke seat.
    """


@seat.command("render")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 when a committed file differs "
              "from a fresh render, and show the difference.")
def render_cmd(check: bool):
    """Render serve/<profile>.sh for every profile, and docker-compose.yml, .env and
    LAUNCH_CONFIG.md for the default profile."""
    if check:
        render.require_no_drift()
        out.print("rendered files match their profiles")
        return
    written = render.write()
    for path in written:
        out.print(f"wrote {path.relative_to(render.paths.REPO)}")
    if not written:
        out.print("everything was already up to date")


@seat.command("lint")
@PROFILE
@click.option("--python", help="Python of a venv with vLLM to check with (default: the "
              "profile's own runtime, else cpu-smoke's).")
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
            out.print(table)
        out.print(f"{len(errors)} error(s), {len(findings) - len(errors)} fork-only; "
                  f"{len(lint.server_argv(prof))} arguments checked")
    sys.exit(1 if errors else 0)


@seat.command("setup")
@click.argument("profile", default=profiles.EMBEDDED_DEFAULT, metavar="[PROFILE]")
def setup_cmd(profile: str):
    """Make a native profile's runtime venv and build its local models (idempotent)."""
    made = runtime.setup(profiles.load(profile), say=lambda m: err.print(f"[dim]setup:[/] {m}"))
    for what, path in made.items():
        out.print(f"{what}: {path}")


@seat.command("up")
@PROFILE
def up_cmd(profile: str):
    """Preflight, start the seat, and wait until /health and /v1/models answer."""
    spec = _spec(profile)
    with err.status(f"starting {profile}") as status:
        run, waited = launch.up(spec, tick=lambda stage, t: status.update(
            f"starting {profile}: waiting for {stage} ({t:.0f} s)"))
    out.print(f"[green]{profile} is up[/] after {waited:.1f} s: {run.url} serves model "
              f"[bold]{run.model}[/] ({run.runtime} {run.ident[:12]})")
    if run.api_key_file:
        out.print(f"API key in {run.api_key_file} (mode 0600)")
    out.print(f"next: curl {run.url}/v1/models  |  seat logs {profile}  |  seat down {profile}")


@seat.command("down")
@PROFILE
@click.option("--grace", default=30.0, show_default=True, help="Seconds to wait after SIGTERM.")
def down_cmd(profile: str, grace: float):
    """Stop exactly what `seat up` started (its PID or container id)."""
    run = launch.down(profile, grace)
    out.print(f"{profile} stopped ({run.runtime} {run.ident[:12]})")


@seat.command("status")
@PROFILE
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_cmd(profile: str, as_json: bool):
    """What `seat up` started for PROFILE, whether it still runs, and its /health answer."""
    info = launch.status(profile)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    for key, value in info.items():
        out.print(f"{key:>8}: {value}")


@seat.command("logs")
@PROFILE
@click.option("--follow/--no-follow", default=True, show_default=True)
def logs_cmd(profile: str, follow: bool):
    """Print (and follow) the server's output."""
    run = launch.recorded(profile)
    if run is None:
        raise SeatError(f"{profile} was not started by `seat up` on this machine")
    for chunk in launch.logs(run, follow):
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()


@seat.command("demo")
@click.argument("profile", default=profiles.EMBEDDED_DEFAULT, metavar="[PROFILE]")
@click.option("--out", "out_dir", default="runs", show_default=True, type=click.Path())
def demo_cmd(profile: str, out_dir: str):
    """The main job on a fresh machine: set up, start, run a short bench (code and prose), stop."""
    with err.status(f"demo {profile}") as status:
        summary, path = demo.run(profile, Path(out_dir), say=status.update)
    _print_summary(summary, path)


def _print_summary(summary: dict, path: Path) -> None:
    table = Table(*report.HEADER, title=f"seat bench: {path}")
    for row in report.rows(summary):
        table.add_row(*row)
    out.print(table)
    for kind, alarm in summary["alarms"].items():
        out.print(f"[yellow]alarm {kind}[/] ({alarm['requests']} requests): {escape(alarm['example'])}")
    out.print(f"discarded (not alone on the server): {summary['discarded']}; "
              f"report: {path / 'report.md'}")


class _BenchGroup(click.Group):
    """`seat bench [PROFILE] [options]` runs the bench; named subcommands (selftest) do their job."""

    def resolve_command(self, ctx, args):
        if not args or args[0] not in self.commands:
            args = ["run", *args]
        return super().resolve_command(ctx, args)


@seat.group("bench", cls=_BenchGroup)
def bench_group():
    """Decode speed split into tokens per step x milliseconds per step.

    `seat bench [PROFILE]` measures a running seat; `seat bench selftest` measures the bench itself
    against a ground-truth oracle.
    """


@bench_group.command("run")
@click.argument("profile", default=profiles.DEFAULT_PROFILE, metavar="[PROFILE]")
@click.option("--url", help="Bench any OpenAI-compatible server instead of a profile's seat.")
@click.option("--model", help="Served model name (with --url).")
@click.option("--k", type=int, help="Draft length the server uses (with --url), for the alarms.")
@click.option("--api-key", envvar="SEAT_BENCH_API_KEY", help="Bearer key (with --url).")
@click.option("--suite", "suites", default="code,prose", show_default=True,
              help="Comma-separated suites from bench/suites.yaml.")
@click.option("--warmups", default=2, show_default=True)
@click.option("--repeats", default=5, show_default=True)
@click.option("--max-tokens", type=int, help="Output length for every prompt (default: the suite's).")
@click.option("--contexts", help="Comma-separated context sizes in tokens for the context suite "
              "(default: the suite's, 0 to 128k).")
@click.option("--temperature", default=0.0, show_default=True)
@click.option("--top-p", default=1.0, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--out", "out_dir", default="runs", show_default=True, type=click.Path())
@click.option("--name", help="Run name (default: the profile or model).")
def bench_run_cmd(profile, url, model, k, api_key, suites, warmups, repeats, max_tokens, contexts,
                  temperature, top_p, seed, out_dir, name):
    """Batch-1, sequential, streamed requests, each split into its two factors from /metrics."""
    target = _target(profile, url, model, k, api_key)
    prompts = workload.suites([s.strip() for s in suites.split(",") if s.strip()], max_tokens,
                              [int(c) for c in contexts.split(",")] if contexts else None)
    options = bench_run.Options(warmups, repeats, {"temperature": temperature, "top_p": top_p,
                                                    "seed": seed})
    out_run = bench_run.RunDir(Path(out_dir), name or (model if url else profile))
    with err.status("benchmarking") as status:
        summary = bench_run.bench(target, prompts, options, out_run, progress=status.update)
    _print_summary(summary, out_run.path)


@bench_group.command("selftest")
@click.option("--repeats", default=3, show_default=True)
def bench_selftest_cmd(repeats: int):
    """Measure the bench against a ground-truth oracle at 200-2,000 tok/s and 1-7 tokens/step."""
    with err.status("selftest") as status:
        result = selftest.selftest(repeats=repeats, progress=status.update)
    table = Table("true tok/s", "measured", "true tokens/step", "measured", "true ms/step",
                  "measured", "worst error", "client-timed tok/s (error)", "client CPU us/token",
                  title="seat bench selftest")
    for p in result["points"]:
        t, m = p["true"], p["measured"]
        table.add_row(f"{t['decode_tok_s']:.1f}", f"{m['decode_tok_s']:.1f}",
                      f"{t['tokens_per_step']:.3f}", f"{m['tokens_per_step']:.3f}",
                      f"{t['ms_per_step']:.3f}", f"{m['ms_per_step']:.3f}",
                      f"{max(p['error'].values()):.3%}",
                      f"{p['client_decode_tok_s']:.1f} ({p['client_error']:.2%})",
                      f"{p['client_cpu_us_per_token']:.1f}")
    out.print(table)
    verdict = "met" if result["met"] else "NOT met"
    out.print(f"worst error {result['worst_error']:.3%}, goal {result['goal']:.1%}: {verdict}")
    sys.exit(0 if result["met"] else 1)


def _target(profile: str, url: str | None, model: str | None, k: int | None,
            api_key: str | None) -> bench_run.Target:
    if url:
        if not model:
            raise SeatError("--url needs --model", "the served model name, as /v1/models lists it")
        return bench_target.of_url(url, model, k, api_key)
    return bench_target.of_profile(profile)


@bench_group.command("compare")
@click.argument("a")
@click.argument("b")
@click.option("--force", is_flag=True, help="Compare even across different models.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table",
              show_default=True)
def bench_compare_cmd(a: str, b: str, force: bool, fmt: str):
    """Two runs (runs/...) or reference cards (bench/references/NAME) side by side, factor by factor.

    Conditions that differ come first; a comparison across models is refused unless --force.
    """
    result = compare.compare(a, b, force)
    if fmt == "json":
        click.echo(compare.as_json(result))
    elif fmt == "markdown":
        click.echo(compare.markdown(result), nl=False)
    else:
        _print_comparison(result)
    if result.refused:
        sys.exit(2)


def _print_comparison(result: compare.Comparison) -> None:
    out.print(f"A = {result.a}\nB = {result.b}")
    out.print("[bold]conditions that differ[/]" if result.differing else "conditions: the same")
    for key, values in result.differing.items():
        out.print(f"  {key}: {escape('; '.join(values))}")
    if result.refused:
        err.print(f"[red]{escape(result.refused)}[/]")
        return
    table = Table("A", "B", "tok/s A / B", "tokens/step A / B", "ms/step A / B", "verdict",
                  title="seat bench compare", show_lines=True)
    for row in result.rows:
        cells = []
        for k in compare.FACTORS:
            a, b = row["a_values"].get(k), row["b_values"].get(k)
            ratio = f" ({row['ratios'][k]:.3f})" if k in row["ratios"] else ""
            cells.append(f"{a if a is None else f'{a:.2f}'} / {b if b is None else f'{b:.2f}'}{ratio}")
        table.add_row(escape(row["a"]), escape(row["b"]), *cells, escape(row["verdict"]["text"]))
    out.print(table)


@bench_group.command("parity")
@click.argument("profile", default=profiles.DEFAULT_PROFILE, metavar="[PROFILE]")
@click.option("--url", help="Any OpenAI-compatible server instead of a profile's seat.")
@click.option("--model", help="Served model name (with --url).")
@click.option("--api-key", envvar="SEAT_BENCH_API_KEY", help="Bearer key (with --url).")
@click.option("--max-tokens", default=256, show_default=True)
@click.option("--against", type=click.Path(exists=True), help="A parity record to compare with.")
@click.option("--out", "out_dir", default="runs", show_default=True, type=click.Path())
def bench_parity_cmd(profile, url, model, api_key, max_tokens, against, out_dir):
    """Record greedy outputs of the code and prose prompts (hashed), and compare with --against."""
    target = _target(profile, url, model, None, api_key)
    prompts = workload.suites(["code", "prose"], max_tokens)
    with err.status("parity") as status:
        folder = parity.record(target, prompts, Path(out_dir), model if url else profile,
                               progress=status.update)
    out.print(f"parity record: {folder / 'parity.json'}")
    if against:
        _print_parity(parity.compare(against, folder))


@bench_group.command("parity-diff")
@click.argument("a", type=click.Path(exists=True))
@click.argument("b", type=click.Path(exists=True))
def bench_parity_diff_cmd(a: str, b: str):
    """Compare two parity records: byte-identical, or the first divergence of each prompt."""
    _print_parity(parity.compare(a, b))


def _print_parity(result: dict) -> None:
    for name, p in result["prompts"].items():
        if p["identical"]:
            out.print(f"{name}: byte-identical")
        elif "reason" in p:
            out.print(f"{name}: not comparable: {p['reason']}")
        else:
            out.print(f"{name}: diverges at token {p['token_position']}, character "
                      f"{p['char_position']}\n  A: {p['a']!r}\n  B: {p['b']!r}", highlight=False)
    out.print("[green]all byte-identical[/]" if result["identical"] else "[red]outputs differ[/]")
    sys.exit(0 if result["identical"] else 1)


def main():
    try:
        seat(standalone_mode=False)
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except SeatError as exc:
        err.print(f"[red]error:[/] {escape(exc.message)}", highlight=False)
        if exc.hint:
            err.print(f"[yellow]hint:[/] {escape(exc.hint)}", highlight=False)
        sys.exit(exc.code)
