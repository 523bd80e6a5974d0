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


def _why_none(column: dict) -> str:
    """Why a column has tok/s at fewer than two lengths."""
    if column["drafted_nothing"]:
        return "it drafted nothing at any k"
    if column["check"]["status"] in ("fails", "no length"):
        return column["check"]["text"]
    if column["adaptive"]:
        return "an adaptive policy's acceptance is not a fixed k's"
    return "ms/step at other lengths is unknown (one draft length timed: the step-time slope is unknown)"


def best(name: str, column: dict, off: dict | None = None, load: bool = False) -> dict:
    """The fixed k with the most tok/s, the ks whose interval overlaps it, and the sentence; with
    off (k=0, drafting off, from the line's intercept) said where it is not slower past doubt, and
    load (a step-time line that falls) that the lengths were timed under different load."""
    figures = list(rated(column["cells"]).values())
    if len(figures) < 2:
        at = ", ".join(f"k={c['k']}" for c, _ in figures) or "no k"
        return {
            "k": None,
            "ties": [],
            "text": f"{name}: tok/s known at {at} only; {_why_none(column)}: no best k",
        }
    top_cell, top = max(figures, key=lambda pair: pair[1]["value"])
    ties = [c["k"] for c, r in figures if c is not top_cell and _overlap(r, top)]
    highest = f"k = {top_cell['k']}, {_range(top)} tok/s, {top_cell['from']}"
    text = f"{name}: best fixed {highest}"
    if ties:  # the highest is not the best past doubt: said first
        text = (
            f"{name}: cannot tell the best k: k = {', '.join(map(str, ties))} overlap the highest, {highest}"
        )
    if column["drafted_nothing"]:
        text += "; it drafted nothing at any k"
    if load and column["kind"] == "run":
        text += "; its lengths were timed under different load (step time fell as drafts grew): not firm"
    if column["check"]["status"] == "fails":
        text += f" of the lengths measured; {column['check']['text']}"
    if top_cell["from"] == "extrapolated":
        text += f"; from an extrapolation alone: run k={top_cell['k']} before relying on it"
    elif top_cell["from"] == "predicted" and column["check"]["status"] != "holds":
        text += f"; predicted from positions not checked at a second length: run k={top_cell['k']}"
    if top_cell["k"] == column["cells"][-1]["k"] and top_cell["from"] != "extrapolated":
        text += "; the longest length shown: longer ones were not predicted"
    no_draft = None  # k=0 against the best: "faster", "cannot tell" or not named (slower past doubt)
    if off and off["decode_tok_s"] and column["kind"] == "run":
        zero = off["decode_tok_s"]
        tied = _overlap(zero, top)
        if tied or zero["value"] > top["value"]:
            no_draft = "cannot tell" if tied else "faster"
            text += f"; no drafting (k=0) is {_range(zero)} tok/s by the step-time line's intercept: " + (
                "cannot tell it from drafting" if tied else "faster: switch drafting off"
            )
    return {
        "k": top_cell["k"],
        "from": top_cell["from"],
        "tok_s": top,
        "ties": ties,
        "no_draft": no_draft,
        "text": text,
    }


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
        part = f"{name} at k={bests[name]['k']}: {g['value']:+.0%}"
        part += f" ({g['low']:+.0%} to {upper})" if known else " (spread unknown)"
        if bests[name]["k"] != one and (not known or g["low"] <= 0):
            part += ", cannot tell it from none"
        if bests[name]["from"] == "extrapolated":
            part += ", from an extrapolation"
        parts.append(part)
    return {
        "one_k": one,
        "gains": gains,
        "text": f"choosing k per suite against k={one} for all: "
        + "; ".join(parts)
        + ". A bound on what choosing k by the text can give, not a claim about any adaptive policy",
    }


def _firmer(name: str, column: dict, b: dict) -> str | None:
    """The run that would make one suite's advice firmer, if any."""
    cells = rated(column["cells"])
    measured = sorted(c["k"] for c in column["cells"] if c["from"] == "measured")
    if column["drafted_nothing"]:
        return None  # said once for every suite
    if column["adaptive"]:
        return f"{name}: bench two fixed draft lengths: an adaptive policy's acceptance is not a fixed k's"
    if column["check"]["status"] == "fails":
        between = [k for k in range(measured[0] + 1, measured[-1]) if k not in measured]
        if between:
            return (
                f"{name}: run k={', '.join(map(str, between))}: the drafter depends on k, so only runs tell"
            )
        return f"{name}: the drafter depends on k: run each length to judge it"
    if b["k"] is None:
        return None
    if b["from"] == "extrapolated":
        return f"{name}: run k={b['k']}: the best is an extrapolation"
    if b["from"] == "predicted" and column["check"]["status"] != "holds":
        return f"{name}: run k={b['k']}: its positions were measured at one length only, unchecked"
    if b["k"] == column["cells"][-1]["k"]:
        return f"{name}: run k={b['k'] + 1}: the best is the longest length shown"
    if b["tok_s"]["low"] is None:
        return (
            f"{name}: more prompts of this kind: k={b['k']} has one value (or repeats all equal), no spread"
        )
    if b["ties"]:
        unmeasured = [k for k in b["ties"] + [b["k"]] if cells[k][0]["from"] != "measured"]
        if unmeasured:
            widest = max(unmeasured, key=lambda k: _width(cells[k][1]))
            return f"{name}: run k={widest}, the least certain of those that cannot be told apart"
        return f"{name}: more prompts of this kind: the measured lengths cannot be told apart"
    return None


def next_runs(advice: dict, bests: dict[str, dict]) -> list[str]:
    """What would make the advice firmer, each a run to make."""
    runs = {n: c for n, c in advice["columns"].items() if c["kind"] == "run"}
    if not runs:
        return [
            "a card carries one draft length and no step-time slope: bench your own seat at two draft lengths"
        ]
    measured = sorted({c["k"] for col in runs.values() for c in col["cells"] if c["from"] == "measured"})
    out = []
    line = advice["line"]
    if all(col["drafted_nothing"] for col in runs.values()):
        out.append(
            "the drafter drafted nothing in any request: no draft length changes that; check that it runs"
        )
    elif line is None:
        free = [k for k in range(1, advice["max_k"] + 1) if k not in measured]
        far = max(free, key=lambda k: (min(abs(k - m) for m in measured), -k)) if free else None
        if far:
            out.append(
                f"run the same suites at k={far}: with one drafted length the step-time slope is "
                f"unknown (the farther from k = {', '.join(map(str, measured))}, the firmer the slope)"
            )
    elif line["falls"]:
        out.append(
            f"step time fell by {-line['slope']:.2f} ms per drafted token: load on the host, not a slope; "
            "rerun the lengths on a quiet host"
        )
    elif line["residual_sd"] is None:
        out.append("repeat each prompt: the step-time line has two points and no spread")
    if any(bests[n].get("no_draft") for n in runs):
        out.append("run the same suites with drafting off (k=0): the intercept is the line's, not measured")
    for name, column in runs.items():
        step = _firmer(name, column, bests[name])
        if step:
            out.append(step)
    return out


def _width(est: dict) -> float:
    return est["high"] - est["low"] if est["low"] is not None else float("inf")


def judge(advice: dict) -> dict:
    """The advice with its judgments: best per column, the per-suite ceiling, the next runs."""
    load = bool(advice["line"] and advice["line"]["falls"])
    bests = {
        name: best(name, col, advice["no_draft"].get(name), load) for name, col in advice["columns"].items()
    }
    runs = {n: c for n, c in advice["columns"].items() if c["kind"] == "run"}
    return {
        **advice,
        "best": bests,
        "ceiling": ceiling(runs, bests),
        "next": next_runs(advice, bests),
    }
