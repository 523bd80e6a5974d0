"""How kmod reads module options: the modprobe.d files in its folders and order, then the kernel
command line's `module.option=value` tokens, which it applies last."""

from __future__ import annotations

from collections.abc import Sequence

from seatkit.host import cmdline
from seatkit.host.system import System

# kmod's folders in its order: a file name in an earlier one masks the same name in later ones.
MODPROBE_DIRS = (
    "/etc/modprobe.d",
    "/run/modprobe.d",
    "/usr/local/lib/modprobe.d",
    "/usr/lib/modprobe.d",
    "/lib/modprobe.d",
)
KERNEL_LINE = "the kernel command line"


def lines(text: str) -> list[tuple[int, list[str]]]:
    """(line number, words) as kmod reads a modprobe.d file: a trailing backslash joins lines,
    a first word starting with # is a comment, words split at spaces and tabs. Quotes are not
    the shell's: they matter only inside option values, which the kernel splits (cmdline.split)."""
    out, joined, first = [], "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if not joined:
            first = number
        if line.endswith("\\"):
            joined += line[:-1]
            continue
        words, joined = (joined + line).split(None, 2), ""
        if words and not words[0].startswith("#"):
            out.append((first, words))
    return out


def kernel_line_options(tokens: list[str], module: str) -> list[str]:
    """`module.option=value` tokens as kmod takes them from the command line: the module name up to
    the first dot (dashes read as underscores), the option after it."""
    out = []
    for token in tokens:
        name, dot, option = token.partition(".")
        if dot and "=" in option and "=" not in name and name.replace("-", "_") == module:
            out.append(option)
    return out


def command_lines(system: System, command: str, module: str) -> list[tuple[str, list[str]]]:
    """(file, words) of every `COMMAND MODULE ...` line kmod reads: its folders, each file name once
    (the first folder's masks the rest), in name order; dashes in the name read as underscores."""
    names = sorted(
        {
            name
            for d in MODPROBE_DIRS
            for name in (system.entries(d) or [])
            if name.endswith(".conf") and not name.startswith(".")
        }
    )
    out = []
    for name in names:
        path = next((f"{d}/{name}" for d in MODPROBE_DIRS if system.read(f"{d}/{name}") is not None), None)
        if path is None:  # only folders or dangling links by that name: kmod skips them too
            continue
        out += [
            (path, words)
            for _, words in lines(system.read(path) or "")
            if len(words) == 3 and words[0] == command and words[1].replace("-", "_") == module
        ]
    return out


def options(system: System, module: str, kernel_line: Sequence[str] = ()) -> tuple[dict[str, str], list[str]]:
    """`options MODULE k=v ...` as modprobe resolves them: every modprobe.d file in name order, later
    files winning, then the kernel command line's `MODULE.k=v` (kmod appends those last, so they
    win); with the files (and the command line) that set any."""
    found: dict[str, str] = {}
    files = []
    for path, words in command_lines(system, "options", module):
        files.append(path)
        found.update((cmdline.key(t), cmdline.value(t)) for t in cmdline.split(words[2]))
    line = kernel_line_options(list(kernel_line), module)
    if line:
        files.append(KERNEL_LINE)
        found.update((cmdline.key(t), cmdline.value(t)) for t in line)
    return found, files
