"""`seat host …`: the host settings that make peer-to-peer decode fast: read, planned, applied, undone."""

from __future__ import annotations

import json
import re

import click
from rich.markup import escape
from rich.table import Table

from seatkit.cli import tables
from seatkit.cli.app import err, out, seat
from seatkit.errors import SeatError
from seatkit.host import (
    change as host_change,
)
from seatkit.host import (
    gpus,
    p2p,
    step,
)
from seatkit.host import (
    plan as host_plan,
)
from seatkit.host import (
    status as host_status,
)
from seatkit.host.system import System
from seatkit.seat import host_profiles
from seatkit.text import counted, plain


@seat.group("host")
def host_group():
    """IOMMU, P2P registry keys, Resizable BAR and HMM: status, plan, apply, rollback, recover."""


def _verdict(row: dict) -> str:
    """DRIFT with nothing known to be live reads as not yet set here, as `seat doctor` says it."""
    if row["verdict"] == "DRIFT" and row.get("live") is None:
        return "not set (live unknown)"
    return row["verdict"]


@host_group.command("status")
@click.option(
    "--profile",
    "profile",
    default="paper",
    show_default=True,
    help="Host profile from host/ (paper or conservative).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_cmd(profile: str, as_json: bool):
    """Per setting: desired (the profile), configured (files), live (kernel and driver), verdict."""
    result = host_status.status(host_profiles.load(profile))
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    table = Table(
        "setting",
        "desired",
        "configured",
        "live",
        "verdict",
        "why / where",
        title=f"seat host status ({profile}), boot {result['boot_id']}",
        show_lines=True,
    )
    for row in result["rows"]:
        why = row.get("why") or "\n".join(
            f"{side}: {row[f'{side}_from']}" for side in ("configured", "live") if row.get(f"{side}_from")
        )
        table.add_row(
            row["setting"],
            *(escape(plain(row[k])) for k in ("desired", "configured", "live")),
            _verdict(row),
            escape(why),
        )
    tables.show(out, table)  # one block per setting where the grid would not fit
    out.print(f"data path: {result['data_path']['verdict']} ({result['data_path']['why']})")
    out.print(f"step probe: {result['step']['verdict']} ({escape(result['step']['why'])})", highlight=False)
    for t in result["transactions"]["in_force"]:
        out.print(
            f"in force: transaction {t['tx']} ({t['profile']})"
            + (", applied in this boot: reboot to take effect" if t["applied_in_this_boot"] else "")
        )
    for txid in result["transactions"]["interrupted"]:
        out.print(f"[red]interrupted:[/] transaction {txid}: run `seat host recover`")


@host_group.command("gpus")
@click.option("--json", "as_json", is_flag=True, help="Print the inventory as JSON.")
def gpus_cmd(as_json: bool):
    """NVML inventory: PCIe links, BAR1, P2P read/write for every pair, power, topology; then ACS on
    the bridges between each GPU pair, IOMMU groups and ATS, from sysfs (root reads them all)."""
    inventory = gpus.inventory()
    none = "no NVIDIA driver answers NVML: no GPUs to list"
    if as_json:  # an empty inventory that says why, never a bare null
        click.echo(
            json.dumps(inventory if inventory is not None else {"gpus": [], "p2p": [], "why": none}, indent=2)
        )
        return
    if inventory is None:
        out.print(none)
        return
    table = Table(
        "#",
        "name",
        "PCIe now / max",
        "BAR1 / VRAM MiB",
        "power W (default)",
        "topology",
        title=f"driver {inventory['driver']}, CUDA {inventory['cuda']}",
    )
    for g in inventory["gpus"]:
        table.add_row(
            str(g["index"]),
            g["name"],
            f"Gen{g['pcie_gen']} x{g['pcie_width']} / Gen{g['pcie_max_gen']} x{g['pcie_max_width']}",
            f"{g['bar1_total_mib']} / {g['memory_mib']}",
            f"{g['power_limit_w']} ({g['power_default_limit_w']})",
            g["topology"]["class"],
        )
    out.print(table)
    for pair in inventory["p2p"]:
        out.print(
            f"GPU{pair['from']} -> GPU{pair['to']}: read {pair['read']}, write {pair['write']}, "
            f"NVLink {pair['nvlink']}, {pair['common_ancestor']}"
        )
    if inventory["p2p_note"]:
        out.print(inventory["p2p_note"])
    _show_pcie(inventory["pcie"])


def _show_pcie(facts: dict) -> None:
    out.print(
        escape(
            f"PCIe: {'VM (' + facts['virtualisation'] + ')' if facts['virtualisation'] else 'bare metal'}"
            f"{', VMD domain' if facts['vmd'] else ''}; IOMMU groups {facts['iommu']['verdict']}: "
            f"{facts['iommu']['why']}"
        ),
        highlight=False,
    )  # sysfs names and tools' words, not markup
    for g in facts["gpus"]:
        out.print(
            escape(
                f"GPU{g['index']} {g['address']}: group {g['iommu_group'] or '-'}, ATS "
                f"{g['ats'] or 'unknown'}, bridges above {' '.join(g['bridges']) or '(none)'}"
            ),
            highlight=False,
        )
    for pair in facts["pairs"]:
        out.print(
            f"GPU{pair['gpus'][0]} <-> GPU{pair['gpus'][1]}: ACS {pair['verdict']}: {escape(pair['why'])}",
            highlight=False,
        )


def _choices(replace: bool, acknowledge: bool):
    return host_plan.Choices(replace=replace, acknowledge_iommu_off=acknowledge)


def _show(plan: host_plan.Plan) -> None:
    facts = plan.facts
    # systemd-detect-virt names containers too (docker is no VM): "runs under" fits both.
    stack = f"boot stack {facts.stack} ({facts.stack_why})" if facts.stack else facts.stack_why
    out.print(
        f"host: {facts.os_id or 'unknown OS'}, {stack}, "
        f"initramfs: {facts.initramfs_why}, driver {facts.driver or 'unknown'}, CPU {facts.vendor or '?'}, "
        f"{facts.cpus or '?'} CPUs, {'runs under ' + facts.virt if facts.virt else 'bare metal'}",
        highlight=False,
    )
    if plan.snippet:
        out.print(escape(plan.snippet), highlight=False)
    if plan.edit and not plan.edit.empty:
        out.print(
            f"command line: add {' '.join(plan.edit.added) or '-'}; replace "
            f"{' '.join(t for _, t in plan.edit.replaced) or '-'}",
            highlight=False,
        )
    for op in plan.ops:
        if isinstance(op, host_plan.FileOp):
            out.print(f"[bold]{op.path}[/]: {op.why}")
            out.print(escape(host_plan.diff(System(), op)), highlight=False, soft_wrap=True)
        else:
            out.print(
                f"[bold]run[/] {escape(' '.join(op.argv))}  ({op.why}; undone by "
                f"{escape(' '.join(op.undo))})",
                highlight=False,
            )
    for argv in plan.regen:
        out.print(f"[bold]then run[/] {escape(' '.join(argv))}", highlight=False)
    if not plan.ops and not plan.snippet:
        out.print("nothing to do: the files already say what the profile asks")
    for warning in plan.warnings:
        out.print(f"[yellow]warning:[/] {escape(warning)}")
    for refusal in plan.refusals:
        out.print(f"[red]refused:[/] {escape(refusal)}")


def _would(plan: host_plan.Plan, system: System) -> str:
    """The answer a dry run owes first: whether `--yes` would act, and if not, what stops it."""
    stops = [*plan.refusals]
    if plan.snippet:
        stops.append("NixOS is configured declaratively: the snippet below goes into configuration.nix")
    if system.euid != 0:
        stops.append("acting needs root (sudo)")
    if not stops:
        return f"--yes would apply this plan: {counted(len(plan.ops), 'change')}, then a reboot"
    heads = "\n".join(f"  - {escape(re.split(r'[:.] ', stop)[0])}" for stop in stops)  # the why follows below
    return f"[red]--yes would not act[/]: {counted(len(stops), 'thing')} {'blocks' if len(stops) == 1 else 'block'} it (each explained below):\n{heads}"


REPLACE = click.option(
    "--replace",
    is_flag=True,
    help="Replace IOMMU tokens that conflict (e.g. iommu=pt); rollback puts them back.",
)
ACKNOWLEDGE = click.option(
    "--acknowledge-iommu-off",
    "acknowledge",
    is_flag=True,
    help="Accept that IOMMU off removes DMA isolation (the paper profile needs it).",
)
HOST_PROFILE = click.argument("profile", metavar="PROFILE")


@host_group.command("plan")
@HOST_PROFILE
@REPLACE
@ACKNOWLEDGE
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def plan_cmd(profile: str, replace: bool, acknowledge: bool, as_json: bool):
    """What `apply PROFILE` would do: each file's diff, each command, and any refusal. Changes nothing.

    Exits 2 when apply would refuse."""
    host = host_profiles.load(profile)
    plan = host_plan.build(host, choices=_choices(replace, acknowledge))
    if as_json:
        click.echo(
            json.dumps({**host_plan.to_json(plan, System()), "iommu_tokens": host.iommu.tokens}, indent=2)
        )
    else:
        _show(plan)
        # Where the kit cannot edit the boot line (a cluster's nodes), provisioning sets these.
        tokens = "; ".join(f"{vendor}: {' '.join(t)}" for vendor, t in host.iommu.tokens.items())
        out.print(f"IOMMU tokens of {host.name}, for node provisioning: {tokens}", highlight=False)
    if plan.refusals:
        raise SystemExit(2)


@host_group.command("apply")
@HOST_PROFILE
@REPLACE
@ACKNOWLEDGE
@click.option("--yes", is_flag=True, help="Act. Without it apply is a dry run that only shows the plan.")
def apply_cmd(profile: str, replace: bool, acknowledge: bool, yes: bool):
    """Apply a host profile in one journaled transaction (dry run unless --yes; acting needs root).

    Files are backed up before they are written; `seat host rollback` undoes the transaction
    byte for byte and `seat host recover` undoes one that was cut short. A reboot follows."""
    plan = host_plan.build(host_profiles.load(profile), choices=_choices(replace, acknowledge))
    if not yes:
        out.print(_would(plan, System()), highlight=False)
    _show(plan)
    if not yes:
        out.print(
            "dry run: nothing was changed"
            + (
                f" ({counted(len(plan.refusals), 'refusal')} above {'blocks' if len(plan.refusals) == 1 else 'block'} --yes)"
                if plan.refusals
                else " (add --yes to apply)"
            )
        )
        if plan.refusals:
            raise SystemExit(2)
        return
    txid = host_change.apply(plan, System(), progress=lambda line: out.print(escape(line)))
    if txid is None:
        out.print("nothing changed, nothing run")
        return
    out.print(
        f"applied as transaction {txid}. Reboot, then `seat host status --profile {profile}`; "
        f"`seat host rollback --tx {txid}` undoes it."
    )


@host_group.command("rollback")
@click.option("--tx", "txid", help="The transaction to undo (default: the latest in force).")
def rollback_cmd(txid: str | None):
    """Undo an applied transaction: restore the files seatkit wrote byte for byte, regenerate the
    boot files for every kernel installed now, then prove no entry or initramfs keeps the change.

    A file edited since seatkit wrote it stops the rollback before anything changes, showing
    before / ours / now; a loader entry edited since apply keeps the edit, without seatkit's tokens."""
    done = host_change.rollback(System(), txid, progress=lambda line: out.print(escape(line)))
    out.print(f"rolled back (transaction {done}); reboot to return to the previous command line")


@host_group.command("recover")
def recover_cmd():
    """Undo every transaction that was cut short (a crash, a failed command), from the journal.

    It always ends with nothing open: when a regeneration tool keeps failing, the files are
    restored, the failure is recorded once, and the exact fix (file, output, command) is printed."""
    closed = host_change.recover(System(), progress=lambda line: out.print(escape(line)))
    out.print(f"recovered: {', '.join(closed)}" if closed else "nothing to recover: no open transaction")


@host_group.command("forget")
@click.argument("txid", metavar="TX")
def forget_cmd(txid: str):
    """Close a transaction without touching any file: the way out when its backups are gone.

    Put the files rollback names back by hand first (or accept them as they are); the journal
    then records the transaction as undone, so plan and apply work again."""
    host_change.forget(System(), txid)
    out.print(f"forgot transaction {txid}: the journal records it as undone by hand")


@host_group.command("verify-p2p")
@click.option(
    "--image", help="Run the probe inside this image (it has torch and CUDA) with every GPU attached."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
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
    result = p2p.judge(p2p.run_probe(image))
    try:
        kept = p2p.store(result, System())
    except OSError as exc:
        kept = f"not kept ({exc}): status will not see it"
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
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
        for problem in result["problems"]:
            out.print(f"[red]problem:[/] {escape(problem)}")
        out.print(f"verdict: {result['verdict']}; result {kept}")
    if result["verdict"] == "failed":
        raise SystemExit(1)


def _verify_step(
    image: str | None,
    as_json: bool,
    seat_profile: str | None,
    layers: int | None,
    hidden: int | None,
    replays: int,
) -> None:
    from seatkit.seat import profiles

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
    result = step.judge(step.run(layers, hidden, replays, image), step.reference(profile), k)
    try:
        kept = step.store(result, System())
    except (OSError, SeatError) as exc:  # a symlink in its place, say: the figures are still shown
        kept = f"not kept ({exc}): status will not see it"
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        forms = result["step"]["forms"]
        table = Table(
            "1+k",
            "KiB",
            "baseline us",
            "one-shot us",
            "NCCL us",
            title=f"{result['step']['placement']}: train p50/p99, per collective p50",
        )
        for t, size in result["step"]["bytes_by_tokens"].items():
            cells = [
                _train_cell((forms.get("baseline") or [{}])[0].get("by_tokens", {}).get(t)),
                _train_cell((forms.get("oneshot") or {}).get("by_tokens", {}).get(t)),
                _train_cell((forms.get("nccl") or {}).get("by_tokens", {}).get(t)),
            ]
            table.add_row(t, f"{size / 1024:.0f}", *cells)
        out.print(table)
        out.print(escape(step.summary(result)), highlight=False)
        for problem in result["problems"]:
            out.print(f"[red]problem:[/] {escape(problem)}")
        out.print(f"verdict: {result['verdict']}; result {kept}")
    if result["verdict"] == "failed":
        raise SystemExit(1)


def _train_cell(figures: dict | None) -> str:
    if not figures:
        return "-"
    if "train_us" not in figures:
        return "stopped: waits gave up"
    train, per = figures["train_us"], figures["per_collective_us"]
    return f"{train['p50']:.0f}/{train['p99']:.0f} ({per['p50']:.1f})"
