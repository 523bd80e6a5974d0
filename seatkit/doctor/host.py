"""Host-setting rows: `seat host status` verdicts and whether `verify-p2p` passed on this boot."""

from __future__ import annotations

from seatkit.doctor.rows import Row, fail, ok, warn
from seatkit.serve.profile import Profile

LAYER = "host"
STATUS = {"OK": "OK", "PENDING-REBOOT": "WARN", "PENDING-RELOAD": "WARN", "UNKNOWN": "WARN",
          "REVERTS": "WARN", "DRIFT": "FAIL", "REFUSED": "FAIL"}
FIX = {"PENDING-REBOOT": "reboot", "PENDING-RELOAD": "reload nvidia modules (or reboot)",
       "DRIFT": "seat host plan {p}; seat host apply {p} --yes",
       "REVERTS": "to keep it past the next boot: seat host plan {p}; seat host apply {p} --yes",
       "REFUSED": "the other host profile",
       "UNKNOWN": "read it as root on the host (not in a container)"}


def rows(status: dict, profile: Profile) -> list[Row]:
    """From host.status.status(): one row per setting, and the data path."""
    if not profile.gpus.count:
        return [ok(LAYER, "settings", f"{profile.name} runs on the CPU: GPU peer settings do not apply")]
    out = []
    for r in status["rows"]:
        verdict = r["verdict"]
        evidence = (f"{verdict}: configured {r.get('configured')}, live {r.get('live')}"
                    + (f"; {r['why']}" if r.get("why") else ""))
        fix = FIX.get(verdict, "").format(p=status["profile"])
        level = STATUS[verdict]
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
