"""What the operator changed in GRUB's files while the campaign ran, kept at its end: grubenv
variables set or unset (grub-set-default between boots), and a grub.cfg regenerated since the
install (a kernel upgrade, an update-grub), which the start's bytes would undo."""

from __future__ import annotations

from seatkit.campaign.boot import GRUB_CFG, GRUBENV
from seatkit.errors import SeatError
from seatkit.host.journal import sha256
from seatkit.host.system import System


def _env(data: bytes | None) -> dict[str, str]:
    lines = (data or b"").decode(errors="replace").splitlines()
    return {
        k: v
        for k, v in (line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
        if k != "next_entry"
    }  # the one-shot's own variable: GRUB and grub-reboot write it


def operator_env(system: System, tx) -> dict:
    """grubenv variables the operator changed since the install (grub-set-default between boots):
    putting the start's bytes back would undo them, so the end sets them again."""
    kept = next((f for r in tx.of_type("keep") for f in r["files"] if f["path"] == GRUBENV), None)
    start = _env(system.read_bytes(kept["backup"]) if kept and kept["backup"] else None)
    now = _env(system.read_bytes(GRUBENV))
    return {
        "set": {k: v for k, v in now.items() if start.get(k) != v},
        "unset": sorted(set(start) - set(now)),
    }


def reapply_env(system: System, edits: dict) -> None:
    for argv in [["grub-editenv", GRUBENV, "set", f"{k}={v}"] for k, v in sorted(edits["set"].items())] + [
        ["grub-editenv", GRUBENV, "unset", k] for k in edits["unset"]
    ]:
        rc, output = system.run(argv)
        if rc:
            raise SeatError(
                f"`{' '.join(argv)}` failed (exit {rc}): {output.strip()[-300:]}",
                "run it by hand: the operator's grubenv edit made during the campaign",
            )


def regenerated(system: System, tx) -> bool:
    """grub.cfg is not what the install's update-grub made: a kernel upgrade or the operator's
    update-grub ran since, and the start's bytes would undo it."""
    made = [r["after"][GRUB_CFG] for r in tx.of_type("regen") if GRUB_CFG in r.get("after", {})]
    return bool(made) and sha256(system.read_bytes(GRUB_CFG)) != made[-1]
