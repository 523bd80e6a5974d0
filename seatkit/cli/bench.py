"""`seat bench …`: measure a seat, measure the bench, compare runs and cards, check parity."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from seatkit.bench import (
    alarms,
    cards,
    compare,
    fleet,
    parity,
    report,
    selftest,
    sweep,
    tokenizer,
    workload,
)
from seatkit.bench import (
    nsys as bench_nsys,
)
from seatkit.bench import (
    run as bench_run,
)
from seatkit.bench.target import Options, Target
from seatkit.cli import tables
from seatkit.cli.app import err, out, seat
from seatkit.cli.progress import progress
from seatkit.doctor import targets
from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.text import counted


class _BenchGroup(click.Group):
    """`seat bench [PROFILE] [options]` runs the bench; named subcommands (selftest) do their job."""

    def parse_args(self, ctx, args):
        # Before the group parses options: `seat bench --url …` is run's option, not the group's.
        if not args or (args[0] not in self.commands and args[0] not in ctx.help_option_names):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@seat.group("bench", cls=_BenchGroup)
def bench_group():
    """Decode speed split into tokens per step x milliseconds per step.

    `seat bench [PROFILE]` measures a running seat; `seat bench selftest` measures the bench itself
    against a ground-truth oracle.
    """


def _workload_options(command):
    """What to send, shared by the bench of one seat and of a fleet."""
    for option in reversed(
        [
            click.option(
                "--suite",
                "suites",
                default="code,prose",
                show_default=True,
                help="Comma-separated suites from bench/suites.yaml.",
            ),
            click.option("--warmups", default=2, show_default=True),
            click.option("--repeats", default=5, show_default=True),
            click.option(
                "--max-tokens", type=int, help="Output length for every prompt (default: the suite's)."
            ),
        ]
    ):
        command = option(command)
    return command


@bench_group.command("run")
@click.argument("profile", default=profiles.DEFAULT_PROFILE, metavar="[PROFILE]")
@click.option("--url", help="Bench any OpenAI-compatible server instead of a profile's seat.")
@click.option("--model", help="Served model name (with --url).")
@click.option("--k", type=int, help="Draft length the server uses (with --url), for the alarms.")
@click.option("--api-key", envvar="SEAT_BENCH_API_KEY", help="Bearer key (with --url).")
@_workload_options
@click.option(
    "--contexts",
    help="Comma-separated context sizes in tokens for the context suite (default: the suite's, 0 to 128k).",
)
@click.option("--temperature", default=0.0, show_default=True)
@click.option("--top-p", default=1.0, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--out", "out_dir", default="runs", show_default=True, type=click.Path())
@click.option("--name", help="Run name (default: the profile or model).")
@click.option(
    "--reference",
    metavar="CARD",
    help="A reference card (bench/references/NAME or a path) whose acceptance-by-position "
    "curves are drawn over the run's.",
)
@click.option(
    "--concurrency",
    metavar="LEVELS",
    help="Comma-separated stream counts, e.g. 1,2,4,8,16: a concurrency sweep of each "
    "suite's first prompt instead of the batch-1 bench (--repeats is not used).",
)
@click.option(
    "--sample-hz",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 50),
    help="Scrape /metrics this often while each batch-1 request streams, to watch the "
    "running and waiting gauges (0: never; scraping delays the stream, CAVEATS.md).",
)
@click.option(
    "--nsys",
    "trace",
    is_flag=True,
    help="After the bench, measure one more request "
    "inside an Nsight Systems collection (nsys start just before it, nsys stop just after); "
    "the seat must run with SEAT_NSYS=session. The run folder's nsys.json gives the trace's "
    "path beside that request's ms/step, steps and decode time.",
)
def bench_run_cmd(
    profile,
    url,
    model,
    k,
    api_key,
    suites,
    warmups,
    repeats,
    max_tokens,
    contexts,
    temperature,
    top_p,
    seed,
    out_dir,
    name,
    reference,
    concurrency,
    sample_hz,
    trace,
):
    """Batch-1, sequential, streamed requests, each split into its two factors from /metrics.

    With --concurrency, levels of N simultaneous streams, each read over its steady window."""
    if trace and (url or concurrency):
        raise click.UsageError(
            "--nsys traces one request of a profile's seat (started by `seat up`), not --url or --concurrency"
        )
    session = bench_nsys.session_of(profile) if trace else None  # refuse before a long bench
    target = _target(profile, url, model, k, api_key)
    card = cards.load(reference) if reference else None
    levels = _levels(concurrency) if concurrency else None
    if levels and card:
        raise SeatError(
            "--reference overlays acceptance by position, which a sweep does not plot",
            "give --reference to a batch-1 run (without --concurrency)",
        )
    prompts = workload.suites(
        [s.strip() for s in suites.split(",") if s.strip()],
        max_tokens,
        [int(c) for c in contexts.split(",")] if contexts else None,
    )
    options = Options(warmups, repeats, {"temperature": temperature, "top_p": top_p, "seed": seed}, sample_hz)
    out_run = bench_run.RunDir(Path(out_dir), name or (model if url else profile))
    try:
        with progress(err, "bench") as update:
            if levels:
                summary = sweep.sweep(target, prompts, options, levels, out_run, progress=update)
            else:
                summary = bench_run.bench(target, prompts, options, out_run, progress=update, reference=card)
    except BaseException:  # Ctrl-C or a failure: what was measured so far is kept
        err.print(f"partial run kept in {escape(str(out_run.path))}", highlight=False, soft_wrap=True)
        raise
    if levels:
        print_sweep(summary, out_run.path)
        return
    print_summary(summary, out_run.path)
    if session:
        prompt = prompts[0] if not prompts[0].context else tokenizer.padded(target, prompts[0])
        with progress(err, "one request inside the nsys collection"):
            result = bench_nsys.traced(target, prompt, options, *session, out_run.path)
        out.print(
            f"nsys: {escape(result['trace'])}\n  {result['expect']}; "
            f"recorded in {out_run.path / 'nsys.json'}",
            highlight=False,
        )


def _levels(text: str) -> list[int]:
    try:
        levels = [int(n) for n in text.split(",") if n.strip()]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1 or len(set(levels)) < len(levels):
        raise SeatError(
            f"--concurrency {text!r} is not a list of stream counts",
            "give distinct positive whole numbers separated by commas, e.g. 1,2,4,8,16",
        )
    return levels


def print_sweep(summary: dict, path: Path) -> None:
    for name, suite in summary["suites"].items():
        table = Table(*report.SWEEP_HEADER, title=f"{name}: {suite['prompt']}")
        for row in report.sweep_rows(suite):
            table.add_row(*row)
        tables.show(out, table)
        for row in suite["levels"]:
            for kind, message in row["alarms"].items():
                out.print(f"[yellow]alarm {kind}[/] ({row['concurrency']} streams): {escape(message)}")
        top = suite["levels"][-1]
        out.print(
            f"client cost at {top['concurrency']} streams: "
            f"{top['client_cpu_us_per_token']:.1f} CPU us per token"
        )
    out.print(f"report: {path / 'report.md'}; plot: {path / 'plots' / 'sweep.png'}")


@bench_group.command("selftest")
@click.option("--repeats", default=3, show_default=True)
def bench_selftest_cmd(repeats: int):
    """Measure the bench against a ground-truth oracle: batch 1 at 200-2,000 tok/s and 1-7
    tokens/step (most ending on a step max_tokens cuts), and a concurrency sweep of 1-16 streams."""
    with progress(err, "bench selftest") as update:
        result = selftest.selftest(repeats=repeats, progress=update)
    # Each figure as true / measured in one cell: a block read alone still says which is which.
    table = Table(
        "point",
        "tok/s true / measured",
        "tokens/step true / measured",
        "ms/step true / measured",
        "worst error",
        "client-timed tok/s (error)",
        "client CPU us/token",
        title="seat bench selftest: batch 1 against the oracle",
    )
    for i, p in enumerate(result["points"], 1):
        t, m = p["true"], p["measured"]
        table.add_row(
            f"{i} of {len(result['points'])}",
            f"{t['decode_tok_s']:.1f} / {m['decode_tok_s']:.1f}",
            f"{t['tokens_per_step']:.3f} / {m['tokens_per_step']:.3f}",
            f"{t['ms_per_step']:.3f} / {m['ms_per_step']:.3f}",
            f"{max(p['error'].values()):.3%}",
            f"{p['client_decode_tok_s']:.1f} ({p['client_error']:.2%})",
            f"{p['client_cpu_us_per_token']:.1f}",
        )
    tables.show(out, table)
    table = Table(
        "streams",
        "tok/s true / measured",
        "tokens/step true / measured",
        "ms/step true / measured",
        "worst error",
        title="seat bench selftest: concurrency sweep against the batched oracle",
    )
    for p in result["sweep"]:
        t, m = p["true"], p["measured"]
        table.add_row(
            str(p["concurrency"]),
            f"{t['aggregate_tok_s']:.1f} / {m['aggregate_tok_s'] or 0:.1f}",
            f"{t['tokens_per_step']:.3f} / {m['tokens_per_step'] or 0:.3f}",
            f"{t['ms_per_step']:.3f} / {m['ms_per_step'] or 0:.3f}",
            f"{max(p['error'].values()):.3%}",
        )
    tables.show(out, table)
    top = result["sweep"][-1]
    out.print(
        f"client cost at {top['concurrency']} streams: {top['client_cpu_us_per_token']:.1f} CPU us per token"
    )
    verdict = "met" if result["met"] else "NOT met"
    out.print(
        f"identity tok/s = tokens/step / s/step, worst request: off by "
        f"{result['identity_error']:.1e} (goal {selftest.IDENTITY:.0e})"
    )
    out.print(f"worst error {result['worst_error']:.3%}, goal {result['goal']:.1%}: {verdict}")
    sys.exit(0 if result["met"] else 1)


def _target(profile: str, url: str | None, model: str | None, k: int | None, api_key: str | None) -> Target:
    if url:
        if not model:
            raise SeatError("--url needs --model", "the served model name, as /v1/models lists it")
        return targets.of_url(url, model, k, api_key)
    return targets.of_profile(profile)


@bench_group.command("fleet")
@click.argument("seats", nargs=-1, required=True, metavar="URL_OR_SERVICE...")
@click.option("--model", help="Served model name (default: the one each seat lists).")
@click.option("--k", type=int, help="Draft length the seats use, for the alarms.")
@click.option("--api-key", envvar="SEAT_BENCH_API_KEY", help="Bearer key the seats require.")
@_workload_options
@click.option("--out", "out_dir", default="runs", show_default=True, type=click.Path())
def bench_fleet_cmd(seats, model, k, api_key, suites, warmups, repeats, max_tokens, out_dir):
    """The same bench on every seat of a fleet, each alone in turn, side by side.

    Give each seat's URL, or a headless Service as NAME.NAMESPACE.svc:PORT (one seat per address it
    resolves to). A seat outside the fleet's spread is named with the factor that moved: a slower
    step points at that node's host settings or links, fewer tokens per step at its image or model.
    """
    urls = fleet.seat_urls(list(seats))
    prompts = workload.suites([s.strip() for s in suites.split(",") if s.strip()], max_tokens)
    options = Options(warmups, repeats, {"temperature": 0.0, "top_p": 1.0, "seed": 0})
    with err.status("fleet bench") as status:
        seat_targets = [targets.of_url(url, model or "", k, api_key) for url in urls]
        result, folder = fleet.bench_fleet(
            seat_targets, model, prompts, options, Path(out_dir), progress=status.update
        )
    table = Table(*fleet.HEADER, title=f"seat bench fleet: {folder}")
    for row in fleet.rows(result):
        table.add_row(*(escape(cell) for cell in row))
    out.print(table)
    for verdict in result["verdicts"]:
        out.print(f"seat {escape(verdict['seat'])} ({verdict['suite']}): {escape(verdict['text'])}")
    for line in fleet.failures(result):
        out.print(escape(line))
    out.print(f"fleet report: {folder / 'fleet.md'}")
    if fleet.failures(result):
        raise SeatError("some seats failed their bench", "see the lines above; the others' figures stand")


@bench_group.command("compare")
@click.argument("a")
@click.argument("b")
@click.option("--force", is_flag=True, help="Compare even across different models.")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table", show_default=True
)
def bench_compare_cmd(a: str, b: str, force: bool, fmt: str):
    """Two runs (runs/...) or reference cards (bench/references/NAME) side by side, factor by factor; NAME#ID picks one figure or suite.

    Conditions that differ come first; a comparison across models is refused unless --force.
    Code against prose is compared (the verdict says the text moved tokens/step). Against a card
    from another harness (llm_decode_bench sustained), the run's figure as that harness would
    print it is used, or the row is refused with the reason.
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
    out.print(f"A = {escape(str(result.a))}\nB = {escape(str(result.b))}")
    out.print("[bold]conditions (A vs B)[/]")
    for key, values in result.conditions.items():
        differs = " [yellow](differs)[/]" if key in result.differing else ""
        out.print(f"  {key}: {escape(values)}{differs}")
    out.print("conditions that differ: " + (", ".join(result.differing) or "none"))
    if result.refused:
        err.print(f"[red]{escape(result.refused)}[/]")
        return
    table = Table(
        "A",
        "B",
        "tok/s A / B",
        "tokens/step A / B",
        "ms/step A / B",
        "verdict",
        title="seat bench compare",
        show_lines=True,
    )
    for row in result.rows:
        table.add_row(
            escape(row["a"]),
            escape(row["b"]),
            *map(escape, compare.cells(row)),
            escape(row["verdict"]["text"]),
        )
    tables.show(out, table)
    for row in result.rows:
        if row.get("harness") and not row["harness"].startswith("refused"):
            out.print(escape(row["harness"]))
    out.print(
        f"* derived from the other two factors; – : a side lacks it (the verdict says why). {compare.APART}"
    )


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
    with progress(err, "parity") as update:
        folder = parity.record(target, prompts, Path(out_dir), model if url else profile, progress=update)
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
    for name, p in result["prompts"].items():  # names and texts come from files and servers
        name = escape(name)
        if p["identical"]:
            out.print(f"{name}: byte-identical")
        elif "reason" in p:
            out.print(f"{name}: not comparable: {escape(p['reason'])}")
        else:
            out.print(
                f"{name}: diverges at token {p['token_position']}, character "
                f"{p['char_position']}\n  A: {escape(repr(p['a']))}\n  B: {escape(repr(p['b']))}",
                highlight=False,
            )
    out.print("[green]all byte-identical[/]" if result["identical"] else "[red]outputs differ[/]")
    sys.exit(0 if result["identical"] else 1)


def print_summary(summary: dict, path: Path) -> None:
    table = Table(*report.HEADER, title="seat bench")
    for row in report.rows(summary):
        table.add_row(*map(escape, row))
    tables.show(out, table)
    for line in report.notes(summary):
        out.print(escape(line), highlight=False)
    # Doubtful figures first, in yellow; alarms under which the figures stand are notes.
    for kind, alarm in sorted(summary["alarms"].items(), key=lambda item: alarms.stands(item[0])):
        label = "[dim]note[/]" if alarms.stands(kind) else "[yellow]alarm[/]"
        out.print(
            f"{label} {kind} ({counted(alarm['requests'], 'request')}): {escape(alarm['example'])}",
            highlight=False,
        )
        out.print(Padding(escape(alarms.explained(kind)), (0, 0, 0, 2)), highlight=False)
    for why in summary.get("truncated", []):
        out.print(f"[yellow]truncated[/] (not measured): {escape(why)}")
    out.print(
        f"discarded (not alone on the server): {summary['discarded']}; "
        f"report: {escape(str(path / 'report.md'))}",
        soft_wrap=True,
    )
