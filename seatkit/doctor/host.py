"""Host-setting rows: `seat host status` verdicts and whether `verify-p2p` passed on this boot."""

from __future__ import annotations

from seatkit.doctor.rows import Row, fail, ok, warn
from seatkit.host import detect
from seatkit.host.system import System
from seatkit.serve.profile import Profile
from seatkit.text import plain

LAYER = "host"
STATUS = {"OK": "OK", "PENDING-REBOOT": "WARN", "PENDING-RELOAD": "WARN", "UNKNOWN": "WARN",
          "DRIFT": "FAIL", "REFUSED": "FAIL"}
FIX = {"PENDING-REBOOT": "reboot", "PENDING-RELOAD": "reload nvidia modules (or reboot)",
       "DRIFT": "seat host plan {p}; seat host apply {p} --yes", "REFUSED": "the other host profile"}


def container() -> str | None:
    """The container sign of this machine (detect.container), for the layers that need it."""
    return detect.container(System())


def _unknown_fix(profile: str, system: System) -> str:
    """What would make an unreadable setting readable, from what this machine is."""
    inside = detect.container(system)
    if inside:
        return f"read it on the host: this runs in a container, {inside}, which hides the host's boot files and driver"
    if system.euid != 0:
        return "run it as root: some of the boot files and driver parameters are root's to read"
    return f"seat host plan {profile} says whether seatkit can set it on this boot stack"


def _evidence(r: dict) -> str:
    """Configured and live, each with where it was read when it is not known."""
    parts = []
    for side in ("configured", "live"):
        value, source = r.get(side), r.get(f"{side}_from")
        parts.append(f"{side}: {plain(value)}" + (f" ({source})" if value is None and source else ""))
    return "; ".join(parts) + (f"; {r['why']}" if r.get("why") else "")


def rows(status: dict, profile: Profile, system: System | None = None) -> list[Row]:
    """From host.status.status(): one row per setting, and the data path."""
    if not profile.gpus.count:
        return [ok(LAYER, "settings", f"{profile.name} runs on the CPU: GPU peer settings do not apply")]
    out = []
    for r in status["rows"]:
        verdict = r["verdict"]
        if verdict == "DRIFT" and r.get("live") is None:
            # The files say otherwise, but whether the running driver does is unknown: not yet set
            # here, a warning, not a drift of something that was running.
            evidence = f"not set: the profile wants {plain(r.get('desired'))}; {_evidence(r)}"
            level, fix = "WARN", FIX["DRIFT"].format(p=status["profile"])
        else:
            evidence = f"{verdict}: {_evidence(r)}"
            level = STATUS[verdict]
            fix = (_unknown_fix(status["profile"], system or System()) if verdict == "UNKNOWN"
                   else FIX.get(verdict, "").format(p=status["profile"]))
        out.append(ok(LAYER, r["setting"], evidence) if level == "OK" else
                   (warn if level == "WARN" else fail)(LAYER, r["setting"], evidence, fix))
    path = status["data_path"]
    evidence = f"{path['verdict']}: {path['why']}"
    if path["verdict"] == "verified on this boot":
        out.append(ok(LAYER, "verify-p2p", evidence))
    elif path["verdict"].startswith("FAILED"):
        out.append(fail(LAYER, "verify-p2p", evidence, "seat host status; fix the settings, reboot"))
    else:
        out.append(warn(LAYER, "verify-p2p", evidence, "seat host verify-p2p"))
    return out
