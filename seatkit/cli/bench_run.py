"""`seat bench [run]` and `seat bench fleet`: measure one seat, or every seat of a fleet in turn."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from seatkit.bench import alarms, cards, fleet, nsys, report, run, sweep, tokenizer, workload
from seatkit.bench.target import Options, Target
from seatkit.cli import output
from seatkit.cli.app import err, out
from seatkit.cli.progress import progress
from seatkit.doctor.targets import of_profile, of_url
from seatkit.errors import SeatError
from seatkit.seat import profiles, what_runs
from seatkit.text import counted


def workload_options(command):
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


@click.command("run")
@click.argument("profile", default=profiles.DEFAULT_PROFILE, metavar="[PROFILE]")
@click.option("--url", help="Bench any OpenAI-compatible server instead of a profile's seat.")
@click.option("--model", help="Served model name (with --url).")
@click.option("--k", type=int, help="Draft length the server uses (with --url), for the alarms.")
@click.option("--api-key", envvar="SEAT_BENCH_API_KEY", help="Bearer key (with --url).")
@workload_options
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
    session = nsys.session_of(profile) if trace else None  # refuse before a long bench
    target = target_of(profile, url, model, k, api_key)
    card = cards.load(reference) if reference else None
    levels = _levels(concurrency) if concurrency else None
    if levels and card:
        raise SeatError(
            "--reference overlays acceptance by position, which a sweep does not plot",
            "give --reference to a batch-1 run (without --concurrency)",
        )
    prompts = suites_of(suites, max_tokens, contexts)
    options = Options(warmups, repeats, {"temperature": temperature, "top_p": top_p, "seed": seed}, sample_hz)
    out_run = run.RunDir(Path(out_dir), name or (model if url else profile))
    try:
        with progress(err, "bench") as update:
            if levels:
                summary = sweep.sweep(target, prompts, options, levels, out_run, progress=update)
            else:
                summary = run.bench(target, prompts, options, out_run, progress=update, reference=card)
    except BaseException:  # Ctrl-C or a failure: what was measured so far is kept
        err.print(f"partial run kept in {escape(str(out_run.path))}", highlight=False, soft_wrap=True)
        raise
    if levels:
        print_sweep(summary, out_run.path)
        return
    print_summary(summary, out_run.path)
    if session:
        _trace(target, prompts[0], options, session, out_run.path)


def suites_of(suites: str, max_tokens: int | None, contexts: str | None = None) -> list[workload.Prompt]:
    """The prompts of the comma-separated suites (and context sizes) an option names."""
    names = [s.strip() for s in suites.split(",") if s.strip()]
    return workload.suites(names, max_tokens, [int(c) for c in contexts.split(",")] if contexts else None)


def _trace(
    target: Target,
    prompt: workload.Prompt,
    options: Options,
    session: tuple[object, str, str],
    path: Path,
) -> None:
    """One more request inside the seat's Nsight Systems collection, after the bench."""
    prompt = prompt if not prompt.context else tokenizer.padded(target, prompt)
    with progress(err, "one request inside the nsys collection"):
        result = nsys.traced(target, prompt, options, *session, path)
    out.print(
        f"nsys: {escape(result['trace'])}\n  {result['expect']}; recorded in {path / 'nsys.json'}",
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
        c = summary["conditions"]
        table = Table(
            *report.SWEEP_HEADER,
            title=escape(what_runs.marked(f"{name}: {suite['prompt']}", what_runs.mark(c))),
        )
        for row in report.sweep_rows(suite, c):
            table.add_row(*map(escape, row))
        output.show_table(out, table)
        for row in suite["levels"]:
            for kind, message in row["alarms"].items():
                out.print(f"[yellow]alarm {kind}[/] ({row['concurrency']} streams): {escape(message)}")
        out.print(report.client_cost(suite["levels"]))
    out.print(f"report: {path / 'report.md'}; plot: {path / 'plots' / 'sweep.png'}")


def target_of(profile: str, url: str | None, model: str | None, k: int | None, api_key: str | None) -> Target:
    if url:
        if not model:
            raise SeatError("--url needs --model", "the served model name, as /v1/models lists it")
        return of_url(url, model, k, api_key)
    return of_profile(profile)


@click.command("fleet")
@click.argument("seats", nargs=-1, required=True, metavar="URL_OR_SERVICE...")
@click.option("--model", help="Served model name (default: the one each seat lists).")
@click.option("--k", type=int, help="Draft length the seats use, for the alarms.")
@click.option("--api-key", envvar="SEAT_BENCH_API_KEY", help="Bearer key the seats require.")
@workload_options
@click.option("--out", "out_dir", default="runs", show_default=True, type=click.Path())
def bench_fleet_cmd(seats, model, k, api_key, suites, warmups, repeats, max_tokens, out_dir):
    """The same bench on every seat of a fleet, each alone in turn, side by side.

    Give each seat's URL, or a headless Service as NAME.NAMESPACE.svc:PORT (one seat per address it
    resolves to). A seat outside the fleet's spread is named with the factor that moved: a slower
    step points at that node's host settings or links, fewer tokens per step at its image or model.
    """
    urls = fleet.seat_urls(list(seats))
    prompts = suites_of(suites, max_tokens)
    options = Options(warmups, repeats, {"temperature": 0.0, "top_p": 1.0, "seed": 0})
    with err.status("fleet bench") as status:
        seat_targets = [of_url(url, model or "", k, api_key) for url in urls]
        result, folder = fleet.bench_fleet(
            seat_targets, model, prompts, options, Path(out_dir), progress=status.update
        )
    table = Table(*fleet.HEADER, title=f"seat bench fleet: {folder}")
    for row in fleet.rows(result):
        table.add_row(*(escape(cell) for cell in row))
    out.print(table)
    for line in fleet.verdict_lines(result):
        out.print(escape(line))
    out.print(f"fleet report: {folder / 'fleet.md'}")
    if fleet.failures(result):
        raise SeatError("some seats failed their bench", "see the lines above; the others' figures stand")


def print_summary(summary: dict, path: Path, notes: bool = True) -> None:
    """The bench's table, its notes in plain words (`notes`: the demo prints its own after its
    sentence), its alarms and where the report is."""
    # The heading says what the blocks under it are (at 80 columns each suite is a block of its own).
    model = summary.get("conditions", {}).get("model", "the seat")
    table = Table(*report.HEADER, title=escape(f"{model}, each suite: median (min–max, CV)"))
    for row in report.rows(summary):
        table.add_row(*map(escape, row))
    output.show_table(out, table)
    for line in report.notes(summary) if notes else []:
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
