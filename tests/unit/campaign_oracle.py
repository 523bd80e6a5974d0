"""A TEST ORACLE for the campaign's analysis: a finished campaign's journal made from known effects.

Each visit's ms/step is a suite's base step time (prose 22 % slower than code, as on the real CPU
seat) times the effect of every term of the settings in force on that visit, as the host read them
live, times the visit's noise (log-normal: a boot moves every suite alike). So each effect the
analysis reports has a known truth (`truth`). A term is one setting (a main term) or two (an
interaction: P2P keys that help 10 % only where the IOMMU is off are {("iommu", "p2p"): -0.10}).
"""

from __future__ import annotations

import itertools
import math
import random
from types import SimpleNamespace

from seatkit.campaign import spec as specs

BASE = {"code": 20.0, "prose": 24.4}


def factor(in_force: set[str], terms: dict[tuple[str, ...], float]) -> float:
    """The fraction of base step time the settings in force give."""
    return math.prod(1 + e for t, e in terms.items() if set(t) <= in_force)


def journal(
    design: str,
    settings: list[str],
    terms: dict[tuple[str, ...], float],
    *,
    repeats: int,
    noise: float = 0.01,
    noisy: dict[str, float] | None = None,
    firmware_iommu_off: bool = False,
    missing: dict[int, str] | None = None,
    rng: random.Random | None = None,
):
    """A finished campaign as the analysis reads it, each visit with the IOMMU units it ran with
    (as seatkit.campaign.visit journals them). noisy: an arm's own noise, where not `noise`;
    firmware_iommu_off: no IOMMU unit on any visit, whatever the arm's tokens; missing: {visit:
    suite} a visit has no figure for."""
    rng = rng or random.Random(0)
    arms = specs.designed(design, settings)  # type: ignore[arg-type]
    order = [a for _ in range(repeats) for a in arms]
    records = []
    for i, arm in enumerate(order):
        live = {s for s in arm.host or [] if s != "iommu"}
        live |= {"iommu"} if firmware_iommu_off or "iommu" in (arm.host or []) else set()
        scale = factor(live, terms)
        scale *= math.exp(rng.gauss(0, (noisy or {}).get(arm.name, noise)))
        figures = {
            suite: {"ms_per_step": base * scale, "tokens_per_step": 3.0}
            for suite, base in BASE.items()
            if (missing or {}).get(i) != suite
        }
        records.append(
            {
                "type": "measured",
                "visit": i,
                "arm": arm.name,
                "run": f"runs/{i}",
                "figures": figures,
                "iommu_units": [] if "iommu" in live else ["ivhd0"],
            }
        )
    return SimpleNamespace(
        arms={a.name: a for a in arms},
        id="oracle",
        campaign=SimpleNamespace(design=design, name="oracle", suites=list(BASE), host="paper"),
        visits=order,
        stopping=None,
        of=lambda kind, visit=None: [r for r in records if r["type"] == kind],
    )


def truth(terms: dict[tuple[str, ...], float], factors: list[str], a: str, b: str | None = None) -> float:
    """The true main effect of a (b None) or interaction a×b, in percent: the log contrast
    averaged over the other factors' levels, as the analysis defines it."""
    rest = [f for f in factors if f not in (a, b)]
    logs = []
    for n in range(len(rest) + 1):
        for others in itertools.combinations(rest, n):

            def y(*on: str, others=others) -> float:
                return math.log(factor(set(others) | set(on), terms))

            logs.append(y(a) - y() if b is None else y(a, b) - y(b) - y(a) + y())
    return (math.exp(sum(logs) / len(logs)) - 1) * 100
