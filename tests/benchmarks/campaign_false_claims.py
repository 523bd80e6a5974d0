"""How often the campaign's analysis claims an effect that is not there, with one arm noisier.

1,000 simulated null campaigns per design (no setting has any effect; every arm 1 % noise per
visit, one arm 5 %), made by the test oracle of tests/unit/campaign_oracle.py and judged by
seatkit.campaign.analysis. A campaign counts as a false claim when any of its effects is called
beyond noise; the intervals promise 5 % for all of a campaign's effects together. For comparison,
the same contrasts judged with one noise pooled over all arms (what the analysis did before), and
how often the real effect of a -5 % setting is found (the price of keeping each arm's noise).
Usage:
    .venv/bin/python tests/benchmarks/campaign_false_claims.py [CAMPAIGNS]
"""

import math
import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from campaign_oracle import journal  # noqa: E402

from seatkit.campaign import analysis, effects  # noqa: E402

PAPER = ["iommu", "p2p", "hmm"]
SCENARIOS = [  # design, repeats, the noisy arm (5 % against 1 %)
    ("factorial", 2, "iommu+p2p+hmm"),
    ("factorial", 2, "none"),
    ("factorial", 2, None),
    ("one-at-a-time", 3, "none"),
    ("one-at-a-time", 3, "hmm"),
    ("leave-one-out", 3, "iommu+p2p+hmm"),
]


def pooled_claims(run) -> bool:
    """The same contrasts, each judged with one residual spread pooled over all arms."""
    rows, _ = analysis.visits(run)
    cells = defaultdict(list)
    for r in rows:
        cells[frozenset(r["in_force"])].append(math.log(r["ms"]))
    df = sum(len(v) - 1 for v in cells.values())
    s2 = sum((len(v) - 1) * statistics.variance(v) for v in cells.values()) / df
    factors = [s for s in PAPER if len({s in c for c in cells}) == 2]
    contrasts = effects.host_contrasts(set(cells), factors)
    t = effects.t_quantile(1 - 0.05 / (2 * len(contrasts)), df)
    for c in contrasts:
        b = sum(w * statistics.fmean(cells[cell]) for cell, w in c.weights)
        if abs(b) > t * math.sqrt(s2 * sum(w * w / len(cells[cell]) for cell, w in c.weights)):
            return True
    return False


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = random.Random(2026)
    print(f"{n} null campaigns each; a false claim: any effect called beyond noise (promised: <= 5 %)\n")
    print(f"{'design':<15} {'repeats':>7} {'noisy arm (5 %)':<16} {'own noise':>10} {'pooled':>8}")
    print("-" * 60)
    for design, repeats, noisy in SCENARIOS:
        own = pooled = 0
        for _ in range(n):
            run = journal(design, PAPER, {}, repeats=repeats, noisy={noisy: 0.05} if noisy else {}, rng=rng)
            own += any(e["claimed"] for e in analysis.report(run)["effects"])
            pooled += pooled_claims(run)
        print(f"{design:<15} {repeats:>7} {noisy or '(none)':<16} {own / n:>9.1%} {pooled / n:>8.1%}")
    found = 0
    for _ in range(n):
        run = journal("factorial", PAPER, {("p2p",): -0.05}, repeats=2, rng=rng)
        found += any(e["claimed"] and e["setting"] == "p2p" for e in analysis.report(run)["effects"])
    print(f"\nthe P2P keys at -5 % (1 % noise, factorial, 2 visits per arm): found in {found / n:.1%}")


if __name__ == "__main__":
    main()
