"""The answer: ms/step per arm with its spread, each setting's effect with its uncertainty (and
interactions where a factorial design measures them), tokens/step per arm with an alarm, a verdict.

Effects are fitted on log(ms/step) per visit (the suites' geometric mean), so an effect reads as a
relative change and a design's arms are used together: one-at-a-time against the reference,
leave-one-out against the full set, a factorial by main effects and two-way interactions. The
uncertainty is a 95 % interval from the residual spread between visits (Student's t), made wide
enough (Bonferroni) that all the campaign's effects hold together: six effects at 95 % each would
call one of them real one time in four when none is.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist

from seatkit.campaign.spec import LABELS, Arm
from seatkit.seat import what_runs

TPS_ALARM = 0.02  # tokens/step depends on the text and the drafter, not the host: 2 % is a change


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile by the Cornish-Fisher expansion around the normal one: within 1 % from
    3 degrees of freedom on (fewer give no interval: the campaign needs more repeats)."""
    z = NormalDist().inv_cdf(p)
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def usable(value) -> bool:
    """A figure a log can take: a withheld (None), failed (NaN) or nonsense (<= 0) one is not."""
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def visits(run) -> list[dict]:
    out = []
    for r in run.of("measured"):
        ms = [f["ms_per_step"] for f in r["figures"].values() if usable(f["ms_per_step"])]
        tps = [f["tokens_per_step"] for f in r["figures"].values() if usable(f["tokens_per_step"])]
        if ms:
            out.append(
                {
                    "arm": r["arm"],
                    "visit": r["visit"],
                    "run": r["run"],
                    "ms": math.exp(statistics.fmean(math.log(m) for m in ms)),
                    "tps": statistics.fmean(tps) if tps else None,
                    "unverified": r.get("unverified"),  # as the run's summary marked it
                }
            )
    return out


def columns(run) -> list[tuple[str, Callable[[Arm], int]]]:
    """(name, arm -> 0/1) per fitted effect."""
    arms = list(run.arms.values())
    if any(a.kind == "host" for a in arms):
        present = [s for s in ("iommu", "p2p", "hmm") if any(s in (a.host or []) for a in arms)]
        cols = [(s, _having(s)) for s in present]
        if run.campaign.design == "factorial":
            cols += [(f"{x}×{y}", _having(x, y)) for x, y in itertools.combinations(present, 2)]
        return cols
    return [(a.name, _named(a.name)) for a in arms[1:]]


def _having(*settings: str) -> Callable[[Arm], int]:
    """1 for an arm that has all these host settings, else 0."""
    return lambda arm: int(all(s in (arm.host or []) for s in settings))


def _named(name: str) -> Callable[[Arm], int]:
    return lambda arm: int(arm.name == name)


def fit(run, rows: list[dict]) -> tuple[list[dict], int]:
    import numpy  # here, so importing the campaign costs no numpy

    cols = columns(run)
    if not rows:
        return [], 0
    x = numpy.array([[1.0] + [float(f(run.arms[r["arm"]])) for _, f in cols] for r in rows])
    y = numpy.array([math.log(r["ms"]) for r in rows])
    keep = [0] + [j for j in range(1, x.shape[1]) if 0 < x[:, j].sum() < len(rows)]
    x = x[:, keep]
    rank = numpy.linalg.matrix_rank(x)
    df = int(len(rows) - rank)
    beta, *_ = numpy.linalg.lstsq(x, y, rcond=None)
    # An effect is estimable when its contrast lies in the rows' span; with an arm skipped or failed
    # (one-at-a-time without its reference) least squares still gives a number, and it means nothing.
    unit = numpy.eye(x.shape[1])
    estimable = [numpy.linalg.matrix_rank(numpy.vstack([x, unit[p]])) == rank for p in range(x.shape[1])]
    cov, t = None, 0.0  # t: the interval's quantile, set with cov
    if df >= 3:
        s2 = float(((y - x @ beta) ** 2).sum()) / df
        cov = s2 * numpy.linalg.pinv(x.T @ x)  # exact for estimable contrasts, full rank or not
        t = t_quantile(1 - 0.05 / (2 * max(1, sum(estimable[1:]))), df)  # Bonferroni over the judged
    effects: list[dict[str, float | bool | str | None]] = []
    for position, j in enumerate(keep[1:], 1):
        name = cols[j - 1][0]
        if not estimable[position]:
            effects.append(
                {
                    "setting": name,
                    "effect_pct": None,
                    "uncertainty_pct": None,
                    "interaction": "×" in name,
                    "why": "confounded (an arm it needs was skipped or gave no figure)",
                }
            )
            continue
        b = float(beta[position])
        u = None if cov is None else t * math.sqrt(max(0.0, cov[position, position])) * math.exp(b) * 100
        effects.append(
            {
                "setting": name,
                "effect_pct": (math.exp(b) - 1) * 100,
                "uncertainty_pct": u,
                "interaction": "×" in name,
            }
        )
    measured = {c for c, _ in cols}
    for name in measured - {e["setting"] for e in effects}:
        effects.append(
            {
                "setting": name,
                "effect_pct": None,
                "uncertainty_pct": None,
                "interaction": "×" in name,
                "why": "not measured (no visit with and without it)",
            }
        )
    return effects, df


def arms_table(run, rows: list[dict]) -> list[dict]:
    all_tps = [r["tps"] for r in rows if r["tps"]]
    # A seat variant (another k, another drafter) is meant to move tokens/step; the host is not.
    watched = not any(a.kind == "profile" for a in run.arms.values())
    overall = statistics.median(all_tps) if all_tps and watched else None
    out = []
    for arm in run.arms.values():
        mine = [r for r in rows if r["arm"] == arm.name]
        skipped = [r for r in run.of("skipped") if r["arm"] == arm.name]
        ms = [r["ms"] for r in mine]
        tps = [r["tps"] for r in mine if r["tps"]]
        unusable = len(
            {r["visit"] for r in run.of("measured") if r["arm"] == arm.name} - {r["visit"] for r in mine}
        )  # benched, but no figure to fit
        row = {
            "arm": arm.name,
            "visits": len(mine),
            "skipped": len(skipped),
            "unusable": unusable,
            "skipped_why": skipped[0]["why"] if skipped else None,
            "ms_median": statistics.median(ms) if ms else None,
            "ms_min": min(ms) if ms else None,
            "ms_max": max(ms) if ms else None,
            "tps_median": statistics.median(tps) if tps else None,
            "tps_alarm": None,
            "unverified": "; ".join(sorted({r["unverified"] for r in mine if r["unverified"]})) or None,
        }
        if tps and overall and abs(row["tps_median"] / overall - 1) > TPS_ALARM:
            row["tps_alarm"] = (
                f"tokens/step {row['tps_median']:.2f} against {overall:.2f} overall: "
                "the text or the drafter changed, not only the host"
            )
        out.append(row)
    return out


def label(name: str) -> str:
    return " × ".join(LABELS.get(part, part) for part in name.split("×"))


def _pct(value: float, sign: str = "+") -> str:
    """Whole percent for large figures, one decimal for small ones (where 1 % is the whole story)."""
    return format(value, f"{sign}.1f" if abs(value) < 10 else f"{sign}.0f")


def marks(arms: list[dict]) -> dict:
    """The conditions every figure of the campaign carries: {"unverified": why, arm by arm} when
    an arm's seat was unverified (its effects rest on it), else {}."""
    why = "; ".join(f"arm {a['arm']}: {a['unverified']}" for a in arms if a.get("unverified"))
    return {"unverified": why} if why else {}


def verdict(effects: list[dict], arms: list[dict]) -> str:
    """The largest effect first: "IOMMU off carries -40 % ± 1 % of ms/step; the P2P keys -5 % ± 1 %;
    HMM off within noise (+0.3 % ± 1.0 %)"."""
    parts, first = [], True
    ranked = sorted(effects, key=lambda e: -abs(e["effect_pct"] or 0))
    for e in ranked:
        name, value, u = label(e["setting"]), e["effect_pct"], e["uncertainty_pct"]
        if value is None:
            parts.append(f"{name} {e.get('why') or 'not measured'}")
        elif u is None:
            parts.append(f"{name} {value:+.1f} % (no spread to judge it: repeat the arms)")
        elif abs(value) > u:
            size = f"{_pct(value)} % ± {_pct(u, '')} %"
            parts.append(f"{name} carries {size} of ms/step" if first else f"{name} {size}")
            first = False
        else:
            parts.append(f"{name} within noise ({value:+.1f} % ± {u:.1f} %)")
    text = "; ".join(parts) + "." if parts else "nothing measured."
    skipped = [a["arm"] for a in arms if a["skipped"]]
    if skipped:
        text += f" Not in force, skipped: {', '.join(skipped)}."
    unusable = [a["arm"] for a in arms if a.get("unusable")]
    if unusable:
        text += f" Benched but no figure to use (failed, withheld or not finite): {', '.join(unusable)}."
    alarms = [a["arm"] for a in arms if a["tps_alarm"]]
    if alarms:
        text += f" ALARM: tokens/step moved in {', '.join(alarms)}."
    return what_runs.marked(text[0].upper() + text[1:], marks(arms))


def _num(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(arms: list[dict], effects: list[dict], df: int) -> str:
    """Two tables, 80 columns at most."""
    lines = [
        f"{'arm':<22} {'visits':>6} {'ms/step':>8} {'min':>8} {'max':>8} {'tok/step':>8}  note",
        "-" * 79,
    ]
    for a in arms:
        note = (
            "TOKENS/STEP MOVED"
            if a["tps_alarm"]
            else f"{a['skipped']} not in force"
            if a["skipped"]
            else f"{a['unusable']} no figure"
            if a.get("unusable")
            else ""
        )
        # An unverified arm's name is cut shorter, so its mark always shows (the reason is under it).
        arm = what_runs.marked(a["arm"][:11], a, short=True) if a.get("unverified") else a["arm"][:22]
        lines.append(
            f"{arm:<22} {a['visits']:>6} {_num(a['ms_median'], '.2f'):>8} "
            f"{_num(a['ms_min'], '.2f'):>8} {_num(a['ms_max'], '.2f'):>8} "
            f"{_num(a['tps_median'], '.2f'):>8}  {note}"[:79].rstrip()
        )
    heading = what_runs.marked("effect on ms/step", marks(arms), short=True)
    lines += ["", f"{heading:<34} {'effect':>9} {'± 95 %':>8}  (all together; {df} df)", "-" * 79]
    for e in effects:
        lines.append(
            f"{label(e['setting'])[:34]:<34} {_num(e['effect_pct'], '+.1f'):>8}% "
            f"{_num(e['uncertainty_pct'], '.1f'):>7}%" + (f"  {e['why']}"[:34] if e.get("why") else "")
        )
    return "\n".join(lines) + "\n"


def plot(arms: list[dict], rows: list[dict], effects: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    names = [a["arm"] for a in arms]
    for i, name in enumerate(names):
        ms = [r["ms"] for r in rows if r["arm"] == name]
        left.scatter([i] * len(ms), ms, color="tab:blue", s=18)
        if ms:
            left.hlines(statistics.median(ms), i - 0.3, i + 0.3, color="black")
    left.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    left.set_ylabel("ms per step (each visit; bar: median)")
    left.set_title(what_runs.marked("ms/step per arm", marks(arms), short=True))
    shown = [e for e in effects if e["effect_pct"] is not None]
    right.errorbar(
        [e["effect_pct"] for e in shown],
        range(len(shown)),
        xerr=[e["uncertainty_pct"] or 0 for e in shown],
        fmt="o",
        capsize=4,
    )
    right.axvline(0, color="grey", lw=0.8)
    right.set_yticks(range(len(shown)), [label(e["setting"]) for e in shown], fontsize=8)
    right.set_xlabel("effect on ms/step, % (95 % interval)")
    right.set_title(what_runs.marked("effect of each setting", marks(arms), short=True))
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def report(run) -> dict:
    rows = visits(run)
    effects, df = fit(run, rows)
    arms = arms_table(run, rows)
    return {
        "campaign": run.campaign.name,
        "id": run.id,
        "arms": arms,
        "effects": effects,
        "df": df,
        "visits": rows,
        "verdict": verdict(effects, arms),
        "table": table(arms, effects, df),
        **marks(arms),
    }


def write(run, folder: Path) -> dict:
    result = report(run)
    (folder / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    (folder / "report.md").write_text(
        what_runs.marked(f"# Campaign {run.campaign.name} ({run.id})", result)
        + f"\n\n```\n{result['table']}```\n\n"
        f"{result['verdict']}\n\nEach arm's bench is a run folder under runs/: "
        "`seat bench compare runs/A runs/B` compares any two.\n"
    )
    rows = result["visits"]
    if rows:
        plot(result["arms"], rows, result["effects"], folder / "plot.png")
    return result
