"""Effects on ms/step as contrasts of cells, each cell with its own noise.

A cell is what the visits really ran: one live state of the host settings (host arms), or one arm
(seat and live arms). Its figure is the mean of its visits' log(ms/step), its spread their sample
variance, never pooled with another cell's: one noisy arm widens only the effects that use it. An
effect's spread and degrees of freedom combine its cells' (Welch, Satterthwaite); a cell with one
visit has an unknown spread, and so has every effect that uses it. The intervals are 95 % for all
of the campaign's effects together (Bonferroni): six effects at 95 % each would call one of them
real one time in four when none is.

Which effect a figure is, is said with it:
- main: a setting's effect averaged over the other settings' levels (a full factorial);
- interaction: one setting's effect where the other is in force, against where it is not;
- simple: a setting's effect added to one live state (the others as that state has them);
- against: a seat or live arm against the campaign's first arm.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

from seatkit.campaign.spec import LABELS, SETTINGS, arm_name

Cell = frozenset[str] | str  # the settings in force, or an arm's name
ROUNDING = 1e-9  # a log-ratio this small is float rounding: no ms/step figure is read that finely


@dataclass(frozen=True)
class Contrast:
    setting: str  # "p2p", "iommu×p2p", or an arm's name
    kind: str  # main, interaction, simple, against
    at: str  # where it was measured, in words ("" for a main effect)
    weights: tuple[tuple[Cell, float], ...]


def label(name: str) -> str:
    return " × ".join(LABELS.get(part, part) for part in name.split("×"))


def name(effect: dict) -> str:
    """The effect as a reader says it: a simple effect carries where it was measured."""
    at = effect["at"] if effect["kind"] in ("simple", "against") else ""
    return label(effect["setting"]) + (f", {at}" if at else "")


def cell_name(cell: Cell) -> str:
    return cell if isinstance(cell, str) else arm_name(tuple(s for s in SETTINGS if s in cell))


# --- the contrasts a campaign's cells allow -------------------------------------------------------


def host_contrasts(cells: set[frozenset[str]], factors: list[str]) -> list[Contrast]:
    """Main effects and two-way interactions when the cells are a full factorial over the settings
    that changed; else each setting's simple effect wherever two cells differ in it alone."""
    k = len(factors)
    full = {frozenset(c) & set(factors) for c in cells} == {
        frozenset(s) for n in range(k + 1) for s in itertools.combinations(factors, n)
    }
    if full and k:
        out = [
            Contrast(
                a, "main", "", tuple((c, _sign(c, a) / 2 ** (k - 1)) for c in sorted(cells, key=cell_name))
            )
            for a in factors
        ]
        return out + [
            Contrast(
                f"{a}×{b}",
                "interaction",
                f"{label(a)}'s effect where {label(b)} is in force, over where it is not",
                tuple((c, _sign(c, a) * _sign(c, b) / 2 ** (k - 2)) for c in sorted(cells, key=cell_name)),
            )
            for a, b in itertools.combinations(factors, 2)
        ]
    return [
        Contrast(a, "simple", f"added to {cell_name(c)}", ((c | {a}, 1.0), (c, -1.0)))
        for a in factors
        for c in sorted(cells, key=cell_name)
        if a not in c and c | {a} in cells
    ]


def follow_ups(interaction: Contrast, cells: set[frozenset[str]], factors: list[str]) -> list[Contrast]:
    """An interaction's simple effects: each setting where the other is in force and where not,
    averaged over the remaining settings."""
    a, b = interaction.setting.split("×")
    share = 2 ** (len(factors) - 2)
    out = []
    for one, other in ((a, b), (b, a)):
        for on in (True, False):
            weights = tuple(
                (c, _sign(c, one) * ((other in c) == on) / share) for c in sorted(cells, key=cell_name)
            )
            out.append(Contrast(one, "simple", f"{label(other)} {'' if on else 'not '}in force", weights))
    return out


def against_first(arms: list[str]) -> list[Contrast]:
    return [Contrast(a, "against", f"against arm {arms[0]}", ((a, 1.0), (arms[0], -1.0))) for a in arms[1:]]


def _sign(cell: frozenset[str], setting: str) -> float:
    return 1.0 if setting in cell else -1.0


# --- the figures ----------------------------------------------------------------------------------


def estimate(contrast: Contrast, cells: dict[Cell, list[float]], family: int) -> dict:
    """The contrast on log(ms/step) as a percent change, with its 95 % interval (of `family`
    effects together) from its own cells' spreads; `claimed` when the interval leaves out 0."""
    out: dict = {
        "setting": contrast.setting,
        "kind": contrast.kind,
        "at": contrast.at,
        "effect_pct": None,
        "low_pct": None,
        "high_pct": None,
        "df": None,
        "claimed": None,
    }
    used = [(c, w) for c, w in contrast.weights if w]
    out["cells"] = [cell_name(c) for c, _ in used]  # an alarm on one of them reaches the effect
    missing = [cell_name(c) for c, _ in used if not cells.get(c)]
    if missing:
        return {**out, "why": f"not measured: no usable visit of {', '.join(missing)}"}
    b = sum(w * statistics.fmean(cells[c]) for c, w in used)
    out["effect_pct"] = (math.exp(b) - 1) * 100
    alone = [cell_name(c) for c, _ in used if len(cells[c]) < 2]
    if alone:
        return {**out, "why": f"spread unknown: one visit of {', '.join(alone)}"}
    parts = [(w * w * statistics.variance(cells[c]) / len(cells[c]), len(cells[c]) - 1) for c, w in used]
    var = sum(v for v, _ in parts)
    denominator = sum(v * v / n for v, n in parts)
    df = var * var / denominator if denominator else float(sum(n for _, n in parts))
    half = t_quantile(1 - 0.05 / (2 * max(1, family)), df) * math.sqrt(var)
    low, high = (math.exp(b - half) - 1) * 100, (math.exp(b + half) - 1) * 100
    # Under ROUNDING a contrast of equal figures is 0, not an effect (1e-16 of a copied mean).
    claimed = abs(b) > ROUNDING and (low > 0 or high < 0)
    return {**out, "low_pct": low, "high_pct": high, "df": df, "claimed": claimed}


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile for any degrees of freedom from 1 up (Satterthwaite's are fractional),
    by bisection on the distribution function."""
    tail = 1 - p
    low, high = 0.0, 1.0
    while _upper_tail(high, df) > tail:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if _upper_tail(mid, df) > tail else (low, mid)
    return (low + high) / 2


def _upper_tail(t: float, df: float) -> float:
    """P(T > t), t >= 0: half the regularized incomplete beta I_x(df/2, 1/2), x = df/(df+t²)."""
    return 0.5 * _beta_regularized(df / 2, 0.5, df / (df + t * t))


def _beta_regularized(a: float, b: float, x: float) -> float:
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _fraction(a, b, x) / a
    return 1 - front * _fraction(b, a, 1 - x) / b


def _fraction(a: float, b: float, x: float) -> float:
    """The incomplete beta's continued fraction, by Lentz's method."""
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-14:
            break
    return h
