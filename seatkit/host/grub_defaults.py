"""The GRUB defaults files read the way grub-mkconfig reads them: sourced by /bin/sh under
`set -e`, /etc/default/grub first, then /etc/default/grub.d/*.cfg in name order, the last
assignment winning.

This is what the next update-grub will use, so pending edits count, a file that does not parse
is found before anything changes, and a later drop-in that overrides seatkit's is named.
Sourcing reads configuration (as grub-mkconfig does, as root); it changes nothing.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from pathlib import Path

from seatkit.errors import SeatError
from seatkit.host.system import System

DEFAULTS = "/etc/default/grub"
DROPINS = "/etc/default/grub.d"
VARIABLES = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
# What the files print goes to stderr: only the final printf (on fd 3) is the command line.
SOURCE = (
    'exec 3>&1 1>&2; set -e; for f; do . "$f"; done; '
    'printf "%s\\0%s" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT" >&3'
)
TIMEOUT = 60


def sources(system: System) -> list[str]:
    files = [DEFAULTS] if system.exists(DEFAULTS) else []
    names = sorted(
        n.encode("utf-8", "surrogateescape") for n in system.entries(DROPINS) or [] if n.endswith(".cfg")
    )  # the shell's glob, in the C locale's byte order
    paths = [f"{DROPINS}/{n.decode('utf-8', 'surrogateescape')}" for n in names]
    return files + [p for p in paths if system.exists(p)]  # grub-mkconfig's `[ -e ]`: dangling links skipped


def _shown(system: System, text: str) -> str:
    return text.replace(str(system.root).rstrip("/") + "/", "/") if str(system.root) != "/" else text


def syntax_errors(system: System, files: list[str] | None = None) -> list[str]:
    """`sh -n` on each file: the message names the file and line, as grub-mkconfig would fail."""
    out = []
    for path in sources(system) if files is None else files:
        done = subprocess.run(["sh", "-n", str(system.path(path))], capture_output=True)
        if done.returncode:
            message = _shown(system, done.stderr.decode("utf-8", "replace").strip())
            out.append(f"{path} does not parse as grub-mkconfig sources it: {message}")
    return out


def command_line(system: System, files: list[str], replaced: dict[str, str] | None = None) -> str:
    """GRUB_CMDLINE_LINUX and _DEFAULT after sourcing the files (the default entry gets both);
    `replaced` gives a file's would-be content (seatkit's drop-in as apply would write it)."""
    linux, default = variables(system, files, replaced)
    return f"{linux} {default}"


def variables(system: System, files: list[str], replaced: dict[str, str] | None = None) -> tuple[str, str]:
    """GRUB_CMDLINE_LINUX (which recovery entries get too) and GRUB_CMDLINE_LINUX_DEFAULT."""
    replaced = replaced or {}
    with tempfile.TemporaryDirectory(prefix="seatkit-grub-") as folder:
        paths = []
        for path in sorted(set(files) | set(replaced), key=lambda p: (p != DEFAULTS, p)):
            if path in replaced:
                stand_in = Path(folder) / Path(path).name
                stand_in.write_text(replaced[path])
                paths.append(str(stand_in))
            else:
                paths.append(str(system.path(path)))
        done = _source(paths, folder)
    if done.returncode:
        raise SeatError(
            "sourcing the GRUB defaults as grub-mkconfig does failed: "
            + _shown(system, done.stderr.decode("utf-8", "replace").strip()),
            "fix the file it names; update-grub would fail the same way",
        )
    if b"\0" not in done.stdout:  # a file ran `exit`: grub-mkconfig would stop there too, writing nothing
        raise SeatError(
            "sourcing the GRUB defaults as grub-mkconfig does ended early: a file calls `exit`",
            "remove the exit; update-grub would stop there without generating grub.cfg",
        )
    linux, _, default = done.stdout.partition(b"\0")
    return linux.decode("utf-8", "surrogateescape"), default.decode("utf-8", "surrogateescape")


def _source(paths: list[str], folder: str) -> subprocess.CompletedProcess:
    """Sourcing in its own process group, so a file that never ends (a `sleep` whose child keeps
    the pipes open) is stopped whole at the timeout instead of hanging plan."""
    with subprocess.Popen(
        ["sh", "-c", SOURCE, "sh", *paths],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=folder,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise SeatError(
                f"sourcing the GRUB defaults did not finish in {TIMEOUT} s",
                "a defaults file waits or loops; update-grub would hang the same way: fix it",
            ) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def overriders(system: System, after: str) -> list[str]:
    """Drop-ins sourced after `after` that assign the command-line variables."""
    assigns = re.compile(rf"^\s*(?:export\s+)?({'|'.join(VARIABLES)})=", re.M)
    out = []
    for path in sources(system):
        if path > after and path.startswith(DROPINS):
            names = sorted(set(assigns.findall(system.read(path) or "")))
            out += [f"{path} sets {name}" for name in names]
    return out
