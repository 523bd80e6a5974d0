"""The advice's judgments, from the figures and intervals of seatkit.bench.advise: the best fixed k
per suite (or "cannot tell" where intervals overlap), the ceiling of choosing k per suite, and what
to run next to make it firmer."""

from __future__ import annotations

from seatkit.bench.advise import shown


def rated(cells: list[dict]) -> dict[int, tuple[dict, dict]]:
    """Each k with a tok/s: its cell and that figure."""
    return {c["k"]: (c, est) for c in cells if (est := shown(c, "decode_tok_s"))}


def _overlap(a: dict, b: dict) -> bool:
    """Two tok/s intervals that overlap, or either one's spread unknown: the two cannot be told apart."""
    if None in (a["low"], b["low"]):
        return True
    return a["high"] >= b["low"] and b["high"] >= a["low"]


def _range(est: dict, digits: int = 1) -> str:
    if est["low"] is None:
        return f"{est['value']:.{digits}f} (spread unknown)"
    return f"{est['value']:.{digits}f} ({est['low']:.{digits}f}-{est['high']:.{digits}f})"


def best(name: str, column: dict) -> dict:
    """The fixed k with the most tok/s, the ks whose interval overlaps it, and the sentence."""
    figures = list(rated(column["cells"]).values())
    if len(figures) < 2:
        at = ", ".join(f"k={c['k']}" for c, _ in figures) or "no k"
        why = (
            column["check"]["text"]
            if column["check"]["status"] == "fails"
            else "an adaptive policy's acceptance is not a fixed k's"
            if column["adaptive"]
            else "ms/step at other lengths is unknown (one draft length timed: the step-time slope is unknown)"
        )
        return {"k": None, "ties": [], "text": f"{name}: tok/s known at {at} only; {why}: no best k"}
    top_cell, top = max(figures, key=lambda pair: pair[1]["value"])
    ties = [c["k"] for c, r in figures if c is not top_cell and _overlap(r, top)]
    highest = f"k = {top_cell['k']}, {_range(top)} tok/s, {top_cell['from']}"
    text = f"{name}: best fixed {highest}"
    if ties:  # the highest is not the best past doubt: said first
        text = (
            f"{name}: cannot tell the best k: k = {', '.join(map(str, ties))} overlap the highest, {highest}"
        )
    if column["check"]["status"] == "fails":
        text += f" of the lengths measured; {column['check']['text']}"
    if top_cell["from"] == "extrapolated":
        text += f"; from an extrapolation alone: run k={top_cell['k']} before relying on it"
    return {"k": top_cell["k"], "from": top_cell["from"], "tok_s": top, "ties": ties, "text": text}


def ceiling(columns: dict[str, dict], bests: dict[str, dict]) -> dict | None:
    """Each suite at its own best k against one fixed k for all (the k with the least time per
    token over the suites, equal tokens of each): a bound on what choosing k by the text can
    give, never a claim about a real adaptive policy. None with fewer than two suites rated."""
    by_k = {
        name: {k: est for k, (_, est) in rated(col["cells"]).items()}
        for name, col in columns.items()
        if bests[name]["k"] is not None
    }
    common = set.intersection(*(set(r) for r in by_k.values())) if len(by_k) > 1 else set()
    if not common:
        return None
    one = min(sorted(common), key=lambda k: sum(1 / r[k]["value"] for r in by_k.values()))
    gains, parts = {}, []
    for name, r in by_k.items():
        top, there = r[bests[name]["k"]], r[one]
        known = top["low"] is not None and there["low"] is not None
        bounded = known and there["low"] > 0  # a rate whose interval reaches 0: no upper bound
        gains[name] = {
            "value": top["value"] / there["value"] - 1,
            "low": top["low"] / there["high"] - 1 if known else None,
            "high": top["high"] / there["low"] - 1 if bounded else None,
        }
        g = gains[name]
        upper = f"{g['high']:+.0%}" if bounded else "no bound"
        parts.append(
            f"{name} at k={bests[name]['k']}: {g['value']:+.0%}"
            + (f" ({g['low']:+.0%} to {upper})" if known else " (spread unknown)")
        )
    return {
        "one_k": one,
        "gains": gains,
        "text": f"choosing k per suite against k={one} for all: "
        + "; ".join(parts)
        + ". A bound on what choosing k by the text can give, not a claim about any adaptive policy",
    }


def next_runs(advice: dict, bests: dict[str, dict]) -> list[str]:
    """What would make the advice firmer, each a run to make."""
    runs = {n: c for n, c in advice["columns"].items() if c["kind"] == "run"}
    measured = sorted({c["k"] for col in runs.values() for c in col["cells"] if c["from"] == "measured"})
    if not runs:
        return [
            "a card carries one draft length and no step-time slope: bench your own seat at two draft lengths"
        ]
    out = []
    line = advice["line"]
    if line is None:
        free = [k for k in range(1, advice["max_k"] + 1) if k not in measured]
        far = max(free, key=lambda k: (min(abs(k - m) for m in measured), -k)) if free else None
        if far:
            out.append(
                f"run the same suites at k={far}: with one drafted length the step-time slope is "
                f"unknown (the farther from k = {', '.join(map(str, measured))}, the firmer the slope)"
            )
    elif line["residual_sd"] is None:
        out.append("repeat each prompt: the step-time line has two points and no spread")
    for name, b in bests.items():
        if name not in runs or b["k"] is None:
            continue
        if b["from"] == "extrapolated":
            out.append(f"{name}: run k={b['k']}: the best is an extrapolation")
        elif b["tok_s"]["low"] is None:
            out.append(f"{name}: repeat each prompt: one request has no spread")
        elif b["ties"]:
            cells = rated(runs[name]["cells"])
            unmeasured = [k for k in b["ties"] + [b["k"]] if cells[k][0]["from"] != "measured"]
            if unmeasured:
                widest = max(unmeasured, key=lambda k: _width(cells[k][1]))
                out.append(f"{name}: run k={widest}, the least certain of those that cannot be told apart")
            else:
                out.append(f"{name}: more prompts of this kind: the measured lengths cannot be told apart")
    return out


def _width(est: dict) -> float:
    return est["high"] - est["low"] if est["low"] is not None else float("inf")


def judge(advice: dict) -> dict:
    """The advice with its judgments: best per column, the per-suite ceiling, the next runs."""
    bests = {name: best(name, col) for name, col in advice["columns"].items()}
    runs = {n: c for n, c in advice["columns"].items() if c["kind"] == "run"}
    return {
        **advice,
        "best": bests,
        "ceiling": ceiling(runs, bests),
        "next": next_runs(advice, bests),
    }
