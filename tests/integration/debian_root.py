"""A throwaway Debian root with the real boot tools, made by mmdebstrap and cached as a tarball.

In it: GRUB's grub-mkconfig and /etc/grub.d scripts, initramfs-tools' update-initramfs,
dracut, and systemd's kernel-install, all as Debian ships them. Stand-ins only where a chroot
has no hardware: grub-probe (it asks the block device) and the kernel image (any bytes, with the
config update-initramfs checks). Recipe: shared/research/host-real-tools.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
from pathlib import Path

SUITE = "bookworm"
PACKAGES = ("grub2-common", "grub-pc-bin", "initramfs-tools", "dracut-core", "kmod", "systemd")
KVER = "6.1.0-99-amd64"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "seatkit" / "host-roots"

GRUB_PROBE = """#!/bin/sh
# Stand-in for grub-probe: a chroot has no boot disk to probe.
for a in "$@"; do case "$a" in
  --target=device) echo /dev/vda1; exit 0 ;;
  --target=fs_uuid) echo 0a1b2c3d-0000-4000-8000-000000000001; exit 0 ;;
  --target=fs) echo ext2; exit 0 ;;
  --target=partmap) echo msdos; exit 0 ;;
  --target=drive) echo "(hd0,msdos1)"; exit 0 ;;
esac; done
echo
"""


def tarball() -> Path:
    """The cached root for this package list, built with mmdebstrap when missing (a few minutes)."""
    key = hashlib.sha256(" ".join((SUITE,) + PACKAGES).encode()).hexdigest()[:16]
    path = CACHE / f"debian-{SUITE}-{key}.tar"
    if path.exists():
        return path
    if shutil.which("mmdebstrap") is None:  # a fresh CI machine: Debian's own package
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, capture_output=True, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "mmdebstrap"], check=True, capture_output=True, env=env
        )
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial.tar")  # the suffix picks the format
    subprocess.run(
        ["mmdebstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(partial)],
        check=True,
        capture_output=True,
        timeout=1800,
    )
    partial.rename(path)
    return path


def make(root: Path) -> Path:
    """Unpack the cached root and add the stand-ins; returns root."""
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-C", str(root), "-xf", str(tarball())], check=True)
    probe = root / "usr/sbin/grub-probe"
    probe.rename(root / "usr/sbin/grub-probe.real")
    probe.write_text(GRUB_PROBE)
    probe.chmod(0o755)
    kernel(root, KVER)
    shutil.copy(root / "usr/share/grub/default/grub", root / "etc/default/grub")  # as grub-pc's postinst
    (root / "boot/grub").mkdir(exist_ok=True)
    for bulk in ("usr/share/doc", "usr/share/man", "usr/share/locale", "var/cache/apt"):
        shutil.rmtree(root / bulk, ignore_errors=True)  # less to copy for each test
    (root / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    return root


def kernel(root: Path, version: str) -> None:
    """A stand-in kernel: any image bytes, the config update-initramfs checks, an empty modules folder."""
    (root / f"boot/vmlinuz-{version}").write_bytes(b"stand-in kernel image\n")
    (root / f"boot/config-{version}").write_text("CONFIG_BLK_DEV_INITRD=y\nCONFIG_RD_GZIP=y\n")
    modules = root / f"lib/modules/{version}"
    modules.mkdir(parents=True, exist_ok=True)
    for name in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
        (modules / name).write_text("")


def module(root: Path, version: str, name: str, **modinfo: str) -> Path:
    """A stand-in module file: a minimal ELF64 object whose .modinfo is all depmod, modinfo and
    modprobe read (no code: nothing loads it, `modprobe --dry-run` only resolves it)."""
    info = b"".join(f"{k}={v}\0".encode() for k, v in {"license": "GPL", "name": name, **modinfo}.items())
    names = b"\0.modinfo\0.shstrtab\0"
    header = struct.pack(
        "<16sHHIQQQIHHHHHH",
        b"\x7fELF\x02\x01\x01" + bytes(9),
        1,
        62,
        1,
        0,
        0,
        64 + len(info) + len(names),
        0,
        64,
        0,
        0,
        64,
        3,
        2,
    )

    def section(name: int, kind: int, offset: int, size: int) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name, kind, 0, 0, offset, size, 0, 0, 1, 0)

    path = root / f"lib/modules/{version}/updates/dkms/{name.replace('_', '-')}.ko"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        header
        + info
        + names
        + section(0, 0, 0, 0)
        + section(1, 1, 64, len(info))
        + section(10, 3, 64 + len(info), len(names))
    )
    return path


def chroot_runner(root: Path):
    """The kit's runner, running each command inside the root (as root)."""

    def run(argv: list[str]) -> tuple[int, str]:
        done = subprocess.run(
            ["chroot", str(root), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=600,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"},
        )
        return done.returncode, done.stdout.decode("utf-8", "replace")

    return run


if __name__ == "__main__":
    print(tarball())
