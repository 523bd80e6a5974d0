"""`seat bench fleet`: the same bench on every seat of a fleet, one seat at a time, side by side.

Each seat is benched alone, in turn, with the same prompts and the per-request exclusivity proof.
A seat outside the fleet's spread is named with the factor that moved: a slower step usually means
that node's host settings or links; fewer tokens per step, a different image, model or draft config.
The fleet's figure is the median seat, so with three or more seats one slow seat stands out; two
seats can only be shown side by side.
"""

from __future__ import annotations

import json
import math
import socket
import statistics
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import requests

from seatkit import text
from seatkit.bench import counters
from seatkit.bench import run as bench_run
from seatkit.bench.run import RunDir
from seatkit.bench.target import Options, Target
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.seat import what_runs
from seatkit.serve import client

SCHEMA = "seatkit.fleet/1"
FACTORS = ("decode_tok_s", "tokens_per_step", "ms_per_step")
MOVE_FLOOR = 0.02  # a factor never counts as moved by less than 2 %
UNKNOWN_SPREAD = "not judged: one value per seat, its spread unknown (bench with --repeats 2 or more)"
CAUSES = {
    "ms_per_step": "step time: this node's host settings (IOMMU, P2P keys, ReBAR, HMM), its "
    "PCIe links, power or clocks; run `seat doctor` there",
    "tokens_per_step": "acceptance: a different image, model revision or draft config on this "
    "seat; compare its image labels and model lock with the others'",
}


def seat_urls(addresses: list[str]) -> list[str]:
    """Each http(s) URL as given; a HOST:PORT name (a headless Service) becomes one URL per address."""
    urls: list[str] = []
    for address in addresses:
        if "://" in address:
            parts = urlsplit(address)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise SeatError(f"{address!r} is not an http(s) URL", "e.g. http://127.0.0.1:9406")
            urls.append(address.rstrip("/"))
            continue
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SeatError(
                f"{address!r} is neither a URL nor HOST:PORT",
                "give http://HOST:PORT, or a headless Service as NAME.NAMESPACE.svc:PORT",
            )
        try:
            found = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise SeatError(
                f"{host} does not resolve: {exc.strerror}",
                "check the Service name and namespace, or give URLs",
            ) from None
        for family, *_, sockaddr in found:
            if family != found[0][0]:  # a dual-stack name lists each seat once per family
                continue
            ip = sockaddr[0]
            urls.append(f"http://[{ip}]:{port}" if family == socket.AF_INET6 else f"http://{ip}:{port}")
    # One seat once: the same address with or without user:password@ is not a second seat.
    seen: dict[str, str] = {}
    for url in urls:
        seen.setdefault(text.split_credentials(url)[0], url)
    unique = list(seen.values())
    if not unique:
        raise SeatError("no seats to bench", "give one or more URLs or a headless Service name")
    return unique


def served_model(url: str, headers: dict) -> str:
    """The one model a seat serves, for a fleet bench without --model."""
    try:
        models = client.fetch("GET", f"{url}/v1/models", counters.SCRAPE_S, headers=headers).json()["data"]
    except (SeatError, requests.RequestException, ValueError, KeyError, TypeError) as exc:
        raise SeatError(f"cannot list the models of {url}: {exc}", "pass --model") from None
    if len(models) != 1:
        raise SeatError(f"{url} serves {len(models)} models", "pass --model")
    return models[0]["id"]


def _figures(summary: dict) -> dict[str, dict]:
    """Per suite: each factor's median and spread (coefficient of variation; None: one value, its
    spread unknown)."""
    return {
        suite: {f: {"median": s[f]["median"], "cv": s[f]["cv"]} for f in FACTORS if s.get(f)}
        for suite, s in summary["suites"].items()
    }


def judge(seats: list[dict]) -> list[dict]:
    """Per seat and suite: each factor against the fleet's median seat and the seats' own spread."""
    verdicts = []
    suites = dict.fromkeys(s for seat in seats for s in seat["figures"])
    for suite in suites:
        present = [seat for seat in seats if set(FACTORS) <= set(seat["figures"].get(suite, {}))]
        if not present:  # no /metrics counters on any seat: tok/s alone, nothing to decompose
            continue
        fleet = {
            f: statistics.median(seat["figures"][suite][f]["median"] for seat in present) for f in FACTORS
        }
        spreads = {f: [seat["figures"][suite][f]["cv"] for seat in present] for f in FACTORS}
        typical_cv = {f: statistics.median(cvs) if None not in cvs else None for f, cvs in spreads.items()}
        for seat in present:
            figures = seat["figures"][suite]
            ratios = {f: figures[f]["median"] / fleet[f] for f in FACTORS}
            allowed = {f: _allowed(figures[f]["cv"], typical_cv[f]) for f in FACTORS}
            moved = [f for f in FACTORS if allowed[f] is not None and abs(ratios[f] - 1) > allowed[f]]
            unknown = None in allowed.values()
            verdicts.append(
                {
                    "seat": seat["url"],
                    "suite": suite,
                    "ratios": ratios,
                    "allowed": allowed,
                    "moved": moved,
                    "outside": bool(moved) and len(present) >= 3,
                    "text": UNKNOWN_SPREAD if unknown and not moved else _text(ratios, moved, len(present)),
                }
            )
    return verdicts


def _allowed(own: float | None, typical: float | None) -> float | None:
    """How far a factor may sit from the fleet's before it counts as moved; None: one value per
    seat, no spread to judge a move by."""
    if own is None or typical is None:
        return None
    return max(2 * math.hypot(own, typical), MOVE_FLOOR)


def _text(ratios: dict[str, float], moved: list[str], seats: int) -> str:
    if seats < 3:
        return "side by side only: a fleet needs 3 or more seats to single one out"
    if not moved:
        return "within the fleet's spread"
    gap = math.log(ratios["decode_tok_s"])
    named = []
    for factor in ("tokens_per_step", "ms_per_step"):
        if factor in moved:
            part = math.log(ratios[factor]) * (1 if factor == "tokens_per_step" else -1)
            share = f", {part / gap:.0%} of the tok/s gap" if gap else ""
            named.append(
                f"{factor.replace('_', ' ')} {ratios[factor] - 1:+.1%} of the fleet's"
                f"{share}: {CAUSES[factor]}"
            )
    if not named:
        return (
            f"tok/s {ratios['decode_tok_s'] - 1:+.1%} of the fleet's, neither factor alone beyond its spread"
        )
    return "; ".join(named)


def bench_fleet(
    targets: list[Target],
    model: str | None,
    prompts: list[Prompt],
    options: Options,
    out_root: Path,
    progress: Callable[[str], None] = lambda m: None,
) -> tuple[dict, Path]:
    """Bench every seat in turn into out_root/<time>-fleet/<time>-seatN/; returns the summary.
    model: the one every seat serves, or None to ask each seat."""
    for target in targets:
        target.model = model or served_model(target.url, target.headers)
    if len({target.model for target in targets}) > 1:  # before any bench: no fleet to compare
        raise SeatError(
            "the seats serve different models: "
            + ", ".join(f"{target.url} serves {target.model}" for target in targets),
            "a fleet is identical seats: bench the odd seats apart, or redeploy them",
        )
    folder = bench_run.new_folder(out_root, "fleet")
    seats: list[dict] = []
    result = _write(folder, seats)
    for i, target in enumerate(targets, 1):  # target.url: the seat's URL without credentials
        url = target.url
        target.conditions["fleet_seat"] = i
        say = lambda message, i=i, url=url: progress(f"seat {i}/{len(targets)} {url}: {message}")  # noqa: E731
        say("benchmarking alone")
        run_dir = RunDir(folder, f"seat{i}")
        seat = {"seat": i, "url": url, "model": target.model, "run": run_dir.path.name}
        try:
            summary = bench_run.bench(target, prompts, options, run_dir, progress=say)
        except Exception as exc:  # noqa: BLE001 - one bad seat must not lose the others' figures
            why = (
                exc.message
                if isinstance(exc, SeatError)
                else f"{type(exc).__name__}: {exc} (a bug in the kit: please report it)"
            )
            say(f"failed: {why}")
            seats.append({**seat, "error": text.one_line(why), "discarded": 0, "figures": {}})
        else:
            seats.append(
                {
                    **seat,
                    "discarded": summary["discarded"],
                    "figures": _figures(summary),
                    "unverified": what_runs.mark(summary["conditions"]),
                }
            )
        result = _write(folder, seats)  # after every seat: an interrupted fleet keeps what it has
    return result, folder


def _write(folder: Path, seats: list[dict]) -> dict:
    result = {"schema": SCHEMA, "seats": seats, "verdicts": judge(seats)}
    write_atomic(folder / "fleet.json", json.dumps(result, indent=2) + "\n")
    write_atomic(folder / "fleet.md", markdown(result))
    return result


def rows(result: dict) -> list[tuple[str, ...]]:
    """seat, suite, tok/s, tokens/step, ms/step, flag: one row per seat and suite."""
    verdicts = {(v["seat"], v["suite"]): v for v in result["verdicts"]}
    out: list[tuple[str, ...]] = []
    for seat in result["seats"]:
        if not seat["figures"]:  # failed, or every request truncated or skipped: still a seat
            failed = "FAILED" if seat.get("error") else "n/a"
            out.append((f"{seat['seat']} {seat['url']}", "none", "n/a", "n/a", "n/a", failed))
        for suite, figures in seat["figures"].items():
            verdict = verdicts.get((seat["url"], suite))
            flag = "OUTSIDE" if verdict and verdict["outside"] else "ok" if verdict else "n/a"
            out.append(
                (
                    f"{seat['seat']} {seat['url']}",
                    suite,
                    *(f"{figures[f]['median']:.2f}" if f in figures else "n/a" for f in FACTORS),
                    what_runs.marked(flag, seat.get("unverified"), short=True),
                )
            )
    return out


def failures(result: dict) -> list[str]:
    return [f"seat {seat['url']}: failed: {seat['error']}" for seat in result["seats"] if seat.get("error")]


HEADER = ("seat", "suite", "tok/s", "tokens/step", "ms/step", "fleet")


def markdown(result: dict) -> str:
    lines = [
        "# Fleet bench",
        "",
        "Each seat benched alone, in turn; medians per suite. The fleet's figure is its median seat.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows(result)]
    lines += ["", "## Verdicts", ""] + [f"- {line}" for line in verdict_lines(result)]
    return "\n".join(lines) + "\n"


def verdict_lines(result: dict) -> list[str]:
    """Each seat and suite's verdict, then each seat that failed, then each one marked UNVERIFIED."""
    return [
        *(f"seat {v['seat']} ({v['suite']}): {v['text']}" for v in result["verdicts"]),
        *failures(result),
        *(
            f"seat {s['seat']}: {what_runs.marked('its results are', s['unverified'])}"
            for s in result["seats"]
            if s.get("unverified")
        ),
    ]
