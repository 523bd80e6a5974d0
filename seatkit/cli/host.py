"""`seat host …`: the host settings that make peer-to-peer decode fast: read, planned, applied, undone.

This module reads them (status, gpus); host_change plans, applies and undoes them; host_p2p checks
the peer-to-peer data path they open."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from seatkit.cli import output
from seatkit.cli.app import out
from seatkit.cli.host_change import apply_cmd, forget_cmd, plan_cmd, recover_cmd, rollback_cmd
from seatkit.cli.host_p2p import verify_p2p_cmd
from seatkit.host import gpus, status
from seatkit.seat import host_profiles
from seatkit.text import plain


@click.group("host", commands=[plan_cmd, apply_cmd, rollback_cmd, recover_cmd, forget_cmd, verify_p2p_cmd])
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
@output.json_option("the status")
def status_cmd(profile: str, as_json: bool):
    """Per setting: desired (the profile), configured (files), live (kernel and driver), verdict."""
    host = host_profiles.load(profile)
    result = status.status(host)
    # Tokens in the profile's order, as `seat host plan` prints them.
    order = [t for tokens in host.iommu.tokens.values() for t in tokens]
    output.emit(result, as_json, lambda data: _show_status(data, profile, order))


def _in_order(value, order: list[str]):
    if not isinstance(value, list):
        return value
    return sorted(value, key=lambda t: order.index(t) if t in order else len(order))


def _show_status(result: dict, profile: str, order: list[str]) -> None:
    title = f"seat host status ({profile}), boot {result['boot_id']}"
    headers = ("setting", "desired", "configured", "live", "verdict", "why / where")
    table = Table(*headers, title=title, show_lines=True)
    for row in result["rows"]:
        why = row.get("why") or "\n".join(
            f"{side}: {row[f'{side}_from']}" for side in ("configured", "live") if row.get(f"{side}_from")
        )
        table.add_row(
            row["setting"],
            *(escape(plain(_in_order(row[k], order))) for k in ("desired", "configured", "live")),
            _verdict(row),
            escape(why),
        )
    output.show_table(out, table)  # one block per setting where the grid would not fit
    out.print(f"data path: {result['data_path']['verdict']} ({result['data_path']['why']})")
    out.print(f"step probe: {result['step']['verdict']} ({escape(result['step']['why'])})", highlight=False)
    for t in result["transactions"]["in_force"]:
        out.print(
            f"in force: transaction {t['tx']} ({t['profile']})"
            + ("\n  applied in this boot: reboot to take effect" if t["applied_in_this_boot"] else "")
        )
    for txid in result["transactions"]["interrupted"]:
        out.print(f"[red]interrupted:[/] transaction {txid}: run `seat host recover`")


@host_group.command("gpus")
@output.json_option("the inventory")
def gpus_cmd(as_json: bool):
    """NVML inventory: PCIe links, BAR1, P2P read/write for every pair, power, topology; then ACS on
    the bridges between each GPU pair, IOMMU groups and ATS, from sysfs (root reads them all)."""
    inventory = gpus.inventory()
    none = "no GPUs to list: no NVIDIA driver answers here (NVML does not load)"
    # An empty inventory that says why, never a bare null.
    found = inventory if inventory is not None else {"gpus": [], "p2p": [], "why": none}
    output.emit(found, as_json, lambda data: _show_inventory(inventory, none))
    if inventory is None:  # a check that failed: no driver, nothing else here can be read
        raise SystemExit(1)


def _show_inventory(inventory: dict | None, none: str) -> None:
    if inventory is None:
        out.print(none)
        return
    names = {g["name"] for g in inventory["gpus"]}
    one_name = len(names) == 1  # the usual rig: its name once, in the title, not wrapped in each row
    table = Table(
        "#",
        *([] if one_name else ["name"]),
        "PCIe now / max",
        "BAR1 / VRAM MiB",
        "power W\n(default)",
        "topology",
        title=f"{len(inventory['gpus'])} x {names.pop()}" if one_name else None,
    )
    out.print(f"driver {inventory['driver']}, CUDA {inventory['cuda']}", highlight=False)
    for g in inventory["gpus"]:
        table.add_row(
            str(g["index"]),
            *([] if one_name else [g["name"]]),
            f"Gen{g['pcie_gen']} x{g['pcie_width']} / Gen{g['pcie_max_gen']} x{g['pcie_max_width']}",
            f"{g['bar1_total_mib']} / {g['memory_mib']}",
            f"{g['power_limit_w']:g} ({g['power_default_limit_w']:g})",
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
