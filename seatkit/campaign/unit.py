"""The systemd units a campaign installs: the one that resumes it after each boot, and the one that
returns an arm's boot to the normal entry when that fails. What the first runs as root must be root's
alone (`seatkit.campaign.trust`): checked when the unit is written, and by the unit itself before
each start.
"""

from __future__ import annotations

from seatkit.campaign.boot import FALLBACK_NAME, GRUBENV, MARKER
from seatkit.campaign.trust import PLAIN_PATH, import_folders, require_safe_exe, unsafe_exe
from seatkit.host.system import System

__all__ = ["fallback_text", "import_folders", "require_safe_exe", "unit_text", "unsafe_exe"]

STEP_TIMEOUT_S = 6 * 3600  # a step that hangs (a wedged GPU, a bench that never returns) fails the unit
# Where root's fallback takes its tools: the distribution's folders (/usr/local is often a user's)
TOOL_FOLDERS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")


def _root_only_check(seat: str, folders: list[str]) -> str:
    """sh that fails unless the program, its #! interpreter, and every folder above them (as named
    and as resolved) are owned by root and writable by no one else, and nothing under the folders
    the unit's Python imports from (and the profiles it reads) is another's: systemd runs it before
    the step, as root."""
    trees = " ".join(f for f in folders if PLAIN_PATH.fullmatch(f))
    others = (
        f'[ -z "$$(find {trees} "(" ! -user 0 -o ! -type l -perm /022 ")" -print 2>/dev/null | head -n 1)" ] '
        "|| exit 1; "
        if trees
        else ""
    )
    return (
        f'i=; read -r l < {seat}; case "$$l" in "#!"*) set -- $${{l#??}}; i="$$1 $$(readlink -f "$$1")";; esac; '
        f"for p in {seat} $$(readlink -f {seat}) $$i {trees}; do while :; do "
        '[ "$$(stat -Lc %%u "$$p")" = 0 ] || exit 1; '
        'case "$$(stat -Lc %%A "$$p")" in d????????[tT]) ;; ?????w????|????????w?) exit 1;; esac; '
        '[ "$$p" = / ] && break; p=$$(dirname "$$p"); done; done; ' + others + "exit 0"
    )


def unit_text(
    seat: str, root: str = "/", folders: list[str] | None = None, timeout_s: int = STEP_TIMEOUT_S
) -> str:
    """The oneshot unit that resumes the campaign after each boot (removed at the end). It refuses to
    run a `seat` that is not root's alone, a step that outlives `timeout_s` fails, and any failure
    of it starts the fallback unit."""
    where = "" if root == "/" else f" --root {root}"
    return (
        "# Written by seatkit (seat campaign run); removed at the campaign's end.\n"
        "[Unit]\nDescription=seatkit campaign: the next arm after this boot\n"
        "After=network-online.target\nWants=network-online.target\n"
        f"OnFailure={FALLBACK_NAME}\n\n"
        "[Service]\nType=oneshot\n"
        f"ExecStartPre=/bin/sh -c '{_root_only_check(seat, folders or [])}'\n"
        f"ExecStart={seat} campaign step{where}\n"
        f"TimeoutStartSec={timeout_s}\n\n[Install]\nWantedBy=multi-user.target\n"
    )


def fallback_text(system: System) -> str:
    """Started when the step fails or dies: in an arm's boot (its marker on the command line), the
    one-shot is cleared and the host reboots into the normal entry; in the normal boot, nothing.
    Its tools by absolute path, where this host has them (systemd before 239 wants one)."""
    editenv, systemctl = (
        next((f"{d}/{n}" for d in TOOL_FOLDERS if system.path(f"{d}/{n}").is_file()), f"/usr/bin/{n}")
        for n in ("grub-editenv", "systemctl")
    )
    return (
        "# Written by seatkit (seat campaign run); removed at the campaign's end.\n"
        "[Unit]\nDescription=seatkit campaign: back to the normal boot entry after a failed step\n"
        f"ConditionKernelCommandLine={MARKER}\n\n"
        "[Service]\nType=oneshot\n"
        f"ExecStart=-{editenv} {GRUBENV} unset next_entry\n"
        f"ExecStart={systemctl} reboot\n"
    )
