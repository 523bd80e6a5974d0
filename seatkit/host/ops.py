"""What a host plan is made of: the files seatkit owns, files to write and boot-tool commands with
their exact undo. Plan builds them (seatkit.host.plan), a transaction carries them out."""

from __future__ import annotations

from dataclasses import dataclass

MODPROBE_FILE = "/etc/modprobe.d/seatkit-nvidia.conf"
GRUB_DROPIN = "/etc/default/grub.d/99-seatkit.cfg"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
KERNELSTUB_CONFIG = "/etc/kernelstub/configuration"


@dataclass
class FileOp:
    path: str
    new: bytes | None  # None removes the file
    why: str


@dataclass
class CommandOp:
    argv: list[str]
    undo: list[str]
    touches: list[str]
    why: str
