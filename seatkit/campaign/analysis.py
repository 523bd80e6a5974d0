"""The answer: ms/step per arm with its own spread, each setting's effect with its interval and
the kind of effect it is, tokens/step per arm with an alarm, and a verdict made of those figures.

A visit counts by what it ran: each host setting as read live (the IOMMU off where it ran with no
IOMMU unit, whatever the arm's tokens; unreadable units leave the visit out, as a visit lacking a
suite's ms/step is). A setting never seen both ways gets no effect; one resting on visits whose
tokens/step moved is not credited. The effects: seatkit.campaign.effects' (no arms pooled)."""

from __future__ import annotations

import json
import math
import statistics
import textwrap
from collections import defaultdict
from pathlib import Path

from seatkit.bench import oracle
from seatkit.bench.sides import SUMMARY_BYTES
from seatkit.campaign import effects as fx
from seatkit.campaign import picture
from seatkit.campaign.spec import SETTINGS, Arm
from seatkit.errors import SeatError
from seatkit.safe_yaml import read_json
from seatkit.seat import host_profiles, what_runs

TPS_ALARM = 0.02  # tokens/step depends on the text and the drafter, not the host: 2 % is a change
HEADS = {
    "main": "main effects (each averaged over the other settings' levels)",
    "interaction": "interactions (one's effect where the other is in force, over where not)",
    "simple": "simple effects (one setting, the others as named)",
    "against": "each arm against the first",
    "none": "no effect estimated",
}


def usable(value) -> bool:
    """A figure a log can take: a withheld (None), failed (NaN) or nonsense (<= 0) one is not."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and math.isfinite(value) and value > 0


def live_state(record: dict, arm: Arm, iommu_off: bool) -> dict[str, bool | None]:
    """Each host setting on this visit, in force or not (None: unreadable). iommu_off: the host
    profile's IOMMU setting turns it off, which the units read (passthrough leaves them)."""
    out: dict[str, bool | None] = {s: s in (arm.host or []) for s in SETTINGS}
    units = record.get("iommu_units")
    if iommu_off and "iommu_units" in record:  # a journal from before the reading has the plan only
        out["iommu"] = not units if isinstance(units, list) else None
    return out


def _turns_iommu_off(campaign) -> bool:
    try:
        return bool(campaign.host) and host_profiles.load(campaign.host).iommu.mode == "off"
    except (AttributeError, SeatError):  # no host profile (seat arms), or one gone since
        return False


def visits(run) -> tuple[list[dict], list[dict]]:
    """(the visits the estimate uses, the measured ones left out and why)."""
    suites = set(getattr(run.campaign, "suites", None) or [])
    for r in run.of("measured"):
        suites |= set(r["figures"])
    rows, left, iommu_off = [], [], _turns_iommu_off(run.campaign)
    for r in run.of("measured"):
        arm = run.arms[r["arm"]]
        figures = r["figures"]
        lacking = sorted(s for s in suites if not usable((figures.get(s) or {}).get("ms_per_step"))) or (
            [] if suites else ["any suite"]
        )
        state = live_state(r, arm, iommu_off)
        unread = [fx.label(s) for s, v in state.items() if v is None and arm.kind == "host"]
        why = ("no usable ms/step for " + ", ".join(lacking) if lacking else "") or (
            "not read live: " + ", ".join(unread) if unread else ""
        )
        if why:
            left.append({"visit": r["visit"], "arm": r["arm"], "why": why})
            continue
        ms = [figures[s]["ms_per_step"] for s in sorted(suites)]
        tps = [figures[s].get("tokens_per_step") for s in sorted(suites)]
        rows.append(
            {
                "arm": r["arm"],
                "visit": r["visit"],
                "run": r["run"],
                "ms": math.exp(statistics.fmean(math.log(m) for m in ms)),
                "tps": statistics.fmean(tps) if all(usable(t) for t in tps) else None,
                "unverified": r.get("unverified"),  # as the run's summary marked it
                "in_force": [s for s in SETTINGS if state[s]] if arm.kind == "host" else None,
            }
        )
    return rows, left


def estimate(run, rows: list[dict]) -> list[dict]:
    """Every effect the visits allow, each saying which effect it is; a setting an arm names but
    that never changed, or that no two live states isolate, is a row without a number."""
    arms = list(run.arms.values())
    host = any(a.kind == "host" for a in arms)
    cells: dict = defaultdict(list)  # what the visits ran: a live state, or an arm
    for r in rows:
        cells[frozenset(r["in_force"]) if host else r["arm"]].append(math.log(r["ms"]))
    if not host:
        contrasts = fx.against_first([a.name for a in arms])
        return [fx.estimate(c, cells, len(contrasts)) for c in contrasts]
    named = [s for s in SETTINGS if any(s in (a.host or []) for a in arms)]
    factors = [s for s in SETTINGS if len({s in c for c in cells}) == 2]
    contrasts = fx.host_contrasts(set(cells), factors)
    out = [fx.estimate(c, cells, len(contrasts)) for c in contrasts]
    for c in contrasts:
        if c.kind == "interaction" and next(e for e in out if e["setting"] == c.setting)["claimed"]:
            out += [fx.estimate(f, cells, len(contrasts)) for f in fx.follow_ups(c, set(cells), factors)]
    for s in named:
        if not cells:
            why = "not measured: no usable visit"
        elif s not in factors:
            why = _unchanged(s, any(s in c for c in cells), run, rows)
        elif not any(c.setting == s for c in contrasts):
            why = "not measured: no two live states differ in it alone (an arm it needs was skipped or left out)"
        else:
            continue
        out.append({"setting": s, "kind": "none", "at": "", "effect_pct": None, "claimed": None, "why": why})
    return out


def _unchanged(setting: str, on: bool, run, rows: list[dict]) -> str:
    asked = any((setting in (run.arms[r["arm"]].host or [])) != on for r in rows)
    held = f", also where the arm {'leaves it out' if on else 'asks for it'}: the firmware, kernel or modprobe.d held it"
    return f"never changed ({'in force' if on else 'not in force'} on every visit{held if asked else ''})"


def arms_table(run, rows: list[dict], left: list[dict]) -> list[dict]:
    all_tps = [r["tps"] for r in rows if r["tps"]]
    # A seat variant (another k, another drafter) is meant to move tokens/step; the host is not.
    watched = not any(a.kind == "profile" for a in run.arms.values())
    overall = statistics.median(all_tps) if all_tps and watched else None
    out = []
    for arm in run.arms.values():
        mine = [r for r in rows if r["arm"] == arm.name]
        skipped = [r for r in run.of("skipped") if r["arm"] == arm.name]
        ms = [r["ms"] for r in mine]
        cells = {fx.cell_name(frozenset(r["in_force"])) if arm.kind == "host" else arm.name for r in mine}
        tps = [r["tps"] for r in mine if r["tps"]]
        live = {
            "+".join(r["in_force"]) or "none"
            for r in mine
            if r["in_force"] is not None and set(r["in_force"]) != set(arm.host or [])
        }
        row = {
            "arm": arm.name,
            "visits": len(mine),
            "skipped": len(skipped),
            "left_out": len([x for x in left if x["arm"] == arm.name]),
            "skipped_why": skipped[0]["why"] if skipped else None,
            "ms_median": statistics.median(ms) if ms else None,
            "ms_min": min(ms) if ms else None,
            "ms_max": max(ms) if ms else None,
            # its own spread: the sample SD of log(ms/step), as a percent; one visit: unknown
            "spread_pct": statistics.stdev(math.log(m) for m in ms) * 100 if len(ms) > 1 else None,
            "live": ", ".join(sorted(live)) or None,  # what ran, where it is not the arm's plan
            "tps_median": statistics.median(tps) if tps else None,
            "tps_alarm": None,
            "cells": sorted(cells),
            "unverified": "; ".join(sorted({r["unverified"] for r in mine if r["unverified"]})) or None,
        }
        if tps and overall and abs(row["tps_median"] / overall - 1) > TPS_ALARM:
            row["tps_alarm"] = (
                f"tokens/step {row['tps_median']:.2f} against {overall:.2f} overall: "
                "the text or the drafter changed, not only the host"
            )
        out.append(row)
    return out


def interval(e: dict) -> str:
    return f"{e['low_pct']:+.1f} to {e['high_pct']:+.1f} %"


def marks(arms: list[dict]) -> str | None:
    """Why the arms' seats were unverified, arm by arm (their effects rest on them); None: none was."""
    return "; ".join(f"arm {a['arm']}: {a['unverified']}" for a in arms if a.get("unverified")) or None


def verdict(found: list[dict], arms: list[dict], left: list[dict], notes: dict) -> str:
    """One sentence per kind of effect, the largest first: "Main effects (...): IOMMU off carries
    -40.2 % (-41.2 to -39.1 %) of ms/step; the P2P keys -4.4 % (-6.1 to -2.7 %); HMM off within
    noise (+0.1 %, -1.7 to +1.9 %)"; then what was left out, skipped or alarming."""
    sentences = [f"{k.upper()} ({why})" for k, why in notes.items() if why]
    moved = {c for a in arms if a["tps_alarm"] for c in a["cells"]}  # the cells its visits ran
    for kind, head in HEADS.items():
        mine = sorted((e for e in found if e["kind"] == kind), key=lambda e: -abs(e["effect_pct"] or 0))
        parts, first = [], True
        for e in mine:
            if e["effect_pct"] is None:
                parts.append(f"{fx.name(e)}: {e['why']}")
            elif e["claimed"] is None:
                parts.append(f"{fx.name(e)} {e['effect_pct']:+.1f} % ({e['why']}; repeat the arms)")
            elif e["claimed"] and set(e.get("cells") or ()) & moved:
                parts.append(
                    f"{fx.name(e)} {e['effect_pct']:+.1f} % ({interval(e)}), not credited: tokens/step "
                    "moved in visits it rests on, so the text or the drafter changed too"
                )
            elif e["claimed"]:
                parts.append(
                    f"{fx.name(e)}{' carries' if first else ''} {e['effect_pct']:+.1f} % ({interval(e)})"
                )
                parts[-1] += " of ms/step" if first else ""
                first = False
            else:
                parts.append(f"{fx.name(e)} within noise ({e['effect_pct']:+.1f} %, {interval(e)})")
        if parts:
            sentences.append(f"{head[0].upper()}{head[1:]}: " + "; ".join(parts))
    if not found:
        sentences.append("Nothing measured")
    if left:
        out = ", ".join(f"visit {x['visit'] + 1} ({x['arm']}: {x['why']})" for x in left)
        sentences.append(f"Left out of the estimate: {out}")
    skipped = [a["arm"] for a in arms if a["skipped"]]
    if skipped:
        sentences.append(f"Not in force, skipped: {', '.join(skipped)}")
    alarms = [a["arm"] for a in arms if a["tps_alarm"]]
    if alarms:
        sentences.append(f"ALARM: tokens/step moved in {', '.join(alarms)}")
    return what_runs.marked(". ".join(sentences) + ".", marks(arms))


def _num(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(arms: list[dict], found: list[dict]) -> str:
    """Two tables, 80 columns at most; each effect under the kind of effect it is."""
    lines = [
        f"{'arm':<16} {'visits':>6} {'ms/step':>8} {'min':>7} {'max':>7} {'sd %':>7} {'tok/step':>8}  note",
        "-" * 79,
    ]
    for a in arms:
        notes = {  # the first that holds; ALARM: tokens/step moved, the verdict says where
            "ALARM": a["tps_alarm"],
            f"{a['skipped']} skipped": a["skipped"],
            f"{a['left_out']} left out": a["left_out"],
            "live: below": a["live"],
        }
        note = next((text for text, holds in notes.items() if holds), "")
        # An unverified arm's name is cut shorter, so its mark always shows (the reason is under it).
        why = a.get("unverified")
        arm = what_runs.marked(a["arm"][:5], why, short=True) if why else a["arm"][:16]
        spread = "unknown" if a["spread_pct"] is None and a["visits"] else _num(a["spread_pct"], ".1f")
        lines.append(
            f"{arm:<16} {a['visits']:>6} {_num(a['ms_median'], '.2f'):>8} "
            f"{_num(a['ms_min'], '.2f'):>7} {_num(a['ms_max'], '.2f'):>7} {spread:>7} "
            f"{_num(a['tps_median'], '.2f'):>8}  {note}".rstrip()
        )
    ran = "; ".join(f"{a['arm']} ran {a['live']}" for a in arms if a["live"])
    lines += textwrap.wrap(f"live, not as planned: {ran}", 79) if ran else []
    heading = what_runs.marked("effect on ms/step", marks(arms), short=True)
    lines += ["", f"{heading:<44} {'effect':>8} {'95 % interval':>17} {'df':>5}", "-" * 79]
    for kind, head in HEADS.items():
        mine = [e for e in found if e["kind"] == kind]
        if mine:
            lines.append(f"{head}:")
        for e in mine:
            if e["effect_pct"] is None:
                lines += textwrap.wrap(
                    f"{fx.name(e)}: {e['why']}", 79, initial_indent="  ", subsequent_indent="    "
                )
                continue
            spread = "unknown" if e["claimed"] is None else f"{e['low_pct']:+.1f} to {e['high_pct']:+.1f}"
            lines.append(
                f"  {fx.name(e)[:42]:<42} {e['effect_pct']:>+7.1f}% {spread:>17} {_num(e.get('df'), '.1f'):>5}"
            )
    lines.append("sd %: each arm's own spread (of log ms/step); intervals: 95 %, all together")
    return "\n".join(lines) + "\n"


def simulated(run) -> str | None:
    """Why the campaign's figures are not a real host's: the kit's test oracle as its seat, or
    host arms on a fake root (a test's reboots)."""
    system, why = getattr(run, "system", None), []
    if system is None:
        return None
    for r in run.of("measured"):
        try:
            summary = read_json(
                system.path(f"{run.folder}/{r['run']}/summary.json"), "bench summary", SUMMARY_BYTES
            )
        except (SeatError, OSError):
            continue
        if (summary.get("conditions") or {}).get("model") == oracle.MODEL:
            why.append("the seat was the kit's test oracle, its step times set by the test")
            break
    if system.root != Path("/") and any(a.kind == "host" for a in run.arms.values()):
        why.append("the host was a fake root, its reboots done by a test")
    return "; ".join(why) or None


def unfinished(run) -> str | None:
    """Why the report covers less than planned: a damaged journal, stopped (and why), still running."""
    planned = len(getattr(run, "visits", None) or [])
    done = len(run.of("measured")) + len(run.of("skipped"))
    damaged = getattr(run, "damaged", None)
    stop = getattr(run, "stopping", None)
    if damaged:
        why = f"journal line {', '.join(map(str, damaged))} unreadable, left out"
    elif done >= planned:
        return None
    else:
        why = f"{stop['type']}: {stop['why']}" if stop else "still running"
    return f"{done} of {planned} visits; {why}"


def report(run) -> dict:
    rows, left = visits(run)
    found = estimate(run, rows)
    arms = arms_table(run, rows, left)
    notes = {"simulated": simulated(run), "incomplete": unfinished(run)}
    return {
        "campaign": run.campaign.name,
        "id": run.id,
        "arms": arms,
        "effects": found,
        "visits": rows,
        "left_out": left,
        "verdict": verdict(found, arms, left, notes),
        "table": table(arms, found),
        **{k: v for k, v in notes.items() if v},
        **({"unverified": why} if (why := marks(arms)) else {}),
    }


def write(run, folder: Path) -> dict:
    result = report(run)
    title = f"# Campaign {run.campaign.name} ({run.id})" + "".join(
        f" {k.upper()} ({result[k]})" for k in ("simulated", "incomplete") if k in result
    )
    (folder / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    (folder / "report.md").write_text(
        what_runs.marked(title, result.get("unverified")) + f"\n\n```\n{result['table']}```\n\n"
        f"{result['verdict']}\n\nEach arm's bench is a run folder under runs/: "
        "`seat bench compare runs/A runs/B` compares any two.\n"
    )
    if result["visits"]:
        picture.draw(result, folder / "plot.png")
    return result
