"""`seat host verify-p2p`: prove that peer copies work, or replay one decode step's communication."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from seatkit.cli import output
from seatkit.cli.app import err, out
from seatkit.doctor.bench import published_step
from seatkit.errors import SeatError
from seatkit.host import p2p, step
from seatkit.host.system import System
from seatkit.seat import profiles
from seatkit.text import counted


@click.command("verify-p2p")
@click.option(
    "--image", help="Run the probe inside this image (it has torch and CUDA) with every GPU attached."
)
@output.json_option("the result")
@click.option(
    "--step",
    "step_mode",
    is_flag=True,
    help="Replay one decode step's communication instead: 2 x L all-reduces in a CUDA graph.",
)
@click.option(
    "--profile",
    "seat_profile",
    help="With --step: the seat profile whose model gives L and hidden (default: the default profile).",
)
@click.option("--layers", type=click.IntRange(*step.LAYERS), help="With --step: the model's layer count L.")
@click.option("--hidden", type=click.IntRange(*step.HIDDEN), help="With --step: the model's hidden size.")
@click.option(
    "--replays", type=click.IntRange(10, 10000), help="With --step: graph replays timed (default 200)."
)
def verify_p2p_cmd(
    image: str | None,
    as_json: bool,
    step_mode: bool,
    seat_profile: str | None,
    layers: int | None,
    hidden: int | None,
    replays: int | None,
):
    """Check that peer copies really work: every ordered GPU pair byte-checked (a DMA copy and a
    kernel-side peer read, 4 B to 64 MiB), peer bandwidth, and an 80 KB NCCL all-reduce.

    With --step: the communication of one decode step (2 x L all-reduces of (1+k) x hidden bf16,
    1+k from 1 to 8), one-shot peer reads and NCCL, over a self-copy baseline, and the share of
    the published step it explains.

    The result is kept with the boot id; `seat host status` shows it for this boot only. Exits 1
    when a check fails, 3 when there is no CUDA here."""
    step.check_options(step_mode, layers, hidden, replays, seat_profile)
    if step_mode:
        return _verify_step(image, as_json, seat_profile, layers, hidden, replays or 200)
    err.print("checking the peer-to-peer data path ...")
    _keep_and_show(p2p.judge(p2p.run_probe(image)), p2p.RESULT, as_json, _show_probe)


def _keep_and_show(result: dict, path: str, as_json: bool, show) -> None:
    """Keep the result with the boot id (a symlink in its place, say: the figures are still shown),
    show it, and exit 1 when it failed."""
    try:
        kept = p2p.store(result, System(), path)
    except (OSError, SeatError) as exc:
        kept = f"not kept ({exc}): status will not see it"
    output.emit(result, as_json, lambda data: show(data, kept))
    if result["verdict"] == "failed":
        raise SystemExit(1)


def _problems_and_verdict(result: dict, kept: str) -> None:
    for problem in result["problems"]:
        out.print(f"[red]problem:[/] {escape(problem)}")
    out.print(f"verdict: {result['verdict']}; result {kept}")


def _show_probe(result: dict, kept: str) -> None:
    out.print(
        f"{counted(len(result['gpus']), 'GPU')}: {', '.join(dict.fromkeys(result['gpus']))}, "
        f"torch {result['torch']}, CUDA {result['cuda']}",
        highlight=False,
    )
    if result["pairs"]:
        table = Table("pair", "peer access", "DMA copy", "kernel peer read", "GB/s")
        for pair in result["pairs"]:
            table.add_row(
                f"GPU{pair['from']} -> GPU{pair['to']}",
                str(pair["can_access_peer"]),
                "ok" if pair["copy_ok"] else "WRONG",
                "ok" if pair["kernel_read_ok"] else "WRONG",
                f"{pair['bandwidth_gb_s']:.1f}",
            )
        out.print(table)
    if result["allreduce"]:
        ar = result["allreduce"]
        out.print(
            f"all-reduce {ar['bytes'] // 1024} KB over {ar['gpus']} GPUs (NCCL {result['nccl']}): "
            f"{ar['us']:.1f} us, sum {'correct' if ar['correct'] else 'WRONG'}"
        )
    _problems_and_verdict(result, kept)


def _verify_step(
    image: str | None,
    as_json: bool,
    seat_profile: str | None,
    layers: int | None,
    hidden: int | None,
    replays: int,
) -> None:
    profile = profiles.load(seat_profile or profiles.DEFAULT_PROFILE)
    if layers is None or hidden is None:
        shape = step.model_shape(profile, System())
        if isinstance(shape, str):
            raise SeatError(
                f"L and hidden unknown for {profile.name}: {shape}",
                "e.g. --layers 61 --hidden 7168 (read them from the model's config.json)",
            )
        layers, hidden = layers or shape[0], hidden or shape[1]
    err.print(f"replaying one decode step's communication: 2 x {layers} all-reduces, hidden {hidden} ...")
    k = profile.speculative.num_speculative_tokens if profile.speculative else 0
    result = step.judge(step.run(layers, hidden, replays, image), published_step(profile), k)
    _keep_and_show(result, step.RESULT, as_json, _show_step)


def _show_step(result: dict, kept: str) -> None:
    forms = result["step"]["forms"]
    title = f"{result['step']['placement']}: train p50/p99, per collective p50"
    table = Table("1+k", "KiB", "baseline us", "one-shot us", "NCCL us", title=title)
    for t, size in result["step"]["bytes_by_tokens"].items():
        cells = [
            _train_cell((forms.get("baseline") or [{}])[0].get("by_tokens", {}).get(t)),
            _train_cell((forms.get("oneshot") or {}).get("by_tokens", {}).get(t)),
            _train_cell((forms.get("nccl") or {}).get("by_tokens", {}).get(t)),
        ]
        table.add_row(t, f"{size / 1024:.0f}", *cells)
    out.print(table)
    out.print(escape(step.summary(result)), highlight=False)
    _problems_and_verdict(result, kept)


def _train_cell(figures: dict | None) -> str:
    if not figures:
        return "-"
    if "train_us" not in figures:
        return "stopped: waits gave up"
    train, per = figures["train_us"], figures["per_collective_us"]
    return f"{train['p50']:.0f}/{train['p99']:.0f} ({per['p50']:.1f})"
