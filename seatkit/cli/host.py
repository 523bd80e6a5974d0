"""`seat host …`: the host settings that make peer-to-peer decode fast, read and (later) applied."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from seatkit.cli.app import out, seat
from seatkit.host import gpus, settings, status as host_status


@seat.group("host")
def host_group():
    """IOMMU, P2P registry keys, Resizable BAR and HMM: desired, configured and live."""


def _cell(value) -> str:
    if isinstance(value, dict):
        return ";".join(f"{k}={v}" for k, v in value.items()) or "(none)"
    if isinstance(value, list):
        return " ".join(map(str, value)) or "(none)"
    return "unknown" if value is None else str(value)


@host_group.command("status")
@click.option("--profile", "profile", default="paper", show_default=True,
              help="Host profile from host/ (paper or conservative).")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_cmd(profile: str, as_json: bool):
    """Per setting: desired (the profile), configured (files), live (kernel and driver), verdict."""
    result = host_status.status(settings.load(profile))
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    table = Table("setting", "desired", "configured", "live", "verdict", "why / where",
                  title=f"seat host status ({profile}), boot {result['boot_id']}", show_lines=True)
    for row in result["rows"]:
        why = row.get("why") or f"{row.get('configured_from', '')} | {row.get('live_from', '')}"
        table.add_row(row["setting"], *(escape(_cell(row[k])) for k in ("desired", "configured", "live")),
                      row["verdict"], escape(why))
    out.print(table)
    out.print(f"data path: {result['data_path']['verdict']} ({result['data_path']['why']})")


@host_group.command("gpus")
@click.option("--json", "as_json", is_flag=True, help="Print the inventory as JSON.")
def gpus_cmd(as_json: bool):
    """NVML inventory: PCIe links, BAR1, P2P read/write for every pair, power, topology."""
    inventory = gpus.inventory()
    if as_json:
        click.echo(json.dumps(inventory, indent=2))
        return
    if inventory is None:
        out.print("no NVIDIA driver answers NVML: no GPUs to list")
        return
    table = Table("#", "name", "PCIe now / max", "BAR1 / VRAM MiB", "power W (default)", "topology",
                  title=f"driver {inventory['driver']}, CUDA {inventory['cuda']}")
    for g in inventory["gpus"]:
        table.add_row(str(g["index"]), g["name"],
                      f"Gen{g['pcie_gen']} x{g['pcie_width']} / Gen{g['pcie_max_gen']} x{g['pcie_max_width']}",
                      f"{g['bar1_total_mib']} / {g['memory_mib']}",
                      f"{g['power_limit_w']} ({g['power_default_limit_w']})", g["topology"]["class"])
    out.print(table)
    for pair in inventory["p2p"]:
        out.print(f"GPU{pair['from']} -> GPU{pair['to']}: read {pair['read']}, write {pair['write']}, "
                  f"{pair['common_ancestor']}")
    if inventory["p2p_note"]:
        out.print(inventory["p2p_note"])
