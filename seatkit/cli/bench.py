"""`seat bench …`: measure a seat, measure the bench, compare runs and cards, check parity."""

from __future__ import annotations

import sys

import click
from rich.table import Table

from seatkit.bench import report, selftest
from seatkit.cli import output
from seatkit.cli.app import err, out
from seatkit.cli.bench_advise import bench_advise_cmd
from seatkit.cli.bench_compare import bench_compare_cmd, bench_parity_cmd, bench_parity_diff_cmd
from seatkit.cli.bench_run import bench_fleet_cmd, bench_run_cmd
from seatkit.cli.progress import progress


class _BenchGroup(click.Group):
    """`seat bench [PROFILE] [options]` runs the bench; named subcommands (selftest) do their job."""

    def parse_args(self, ctx, args):
        # Before the group parses options: `seat bench --url …` is run's option, not the group's.
        if not args or (args[0] not in self.commands and args[0] not in ctx.help_option_names):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(
    "bench",
    cls=_BenchGroup,
    commands=[
        bench_run_cmd,
        bench_fleet_cmd,
        bench_compare_cmd,
        bench_advise_cmd,
        bench_parity_cmd,
        bench_parity_diff_cmd,
    ],
)
def bench_group():
    """Decode speed split into tokens per step x milliseconds per step.

    `seat bench [PROFILE]` measures a running seat; `seat bench selftest` measures the bench itself
    against a ground-truth oracle.
    """


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
    output.show_table(out, table)
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
    output.show_table(out, table)
    out.print(report.client_cost(result["sweep"]))
    verdict = "met" if result["met"] else "NOT met"
    out.print(
        f"identity tok/s = tokens/step / s/step, worst request: off by "
        f"{result['identity_error']:.1e} (goal {selftest.IDENTITY:.0e})"
    )
    out.print(f"worst error {result['worst_error']:.3%}, goal {result['goal']:.1%}: {verdict}")
    sys.exit(0 if result["met"] else 1)
