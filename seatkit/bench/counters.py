"""The server's /metrics counters, read at a bench's edges: now, once idle, once our requests
finished, and the gauges' peaks while one streams."""

from __future__ import annotations

import threading
import time

import requests

from seatkit.bench import metrics
from seatkit.bench.target import Target
from seatkit.errors import SeatError
from seatkit.serve import client

SCRAPE_S = 10.0  # a whole /metrics, /tokenize or /v1/models answer, not one read of it


def scrape(target: Target) -> metrics.Snapshot | None:
    """The server's counters now; None when it has no /metrics."""
    try:
        answer = client.fetch("GET", f"{target.url}/metrics", SCRAPE_S, headers=target.headers)
    except requests.RequestException as exc:
        raise SeatError(f"cannot read {target.url}/metrics: {exc}") from None
    if answer.status_code == 404:
        return None
    snapshot = metrics.parse(answer.text, target.model)
    return snapshot if snapshot.values or snapshot.success else None


class GaugeSampler(threading.Thread):
    """Peaks of the running and waiting gauges while our request streams."""

    def __init__(self, target: Target, hz: float):
        super().__init__(daemon=True)
        self.target, self.hz, self.stop_event = target, hz, threading.Event()
        self.peak = {"running": 0.0, "waiting": 0.0}
        self.samples = 0

    def run(self):
        while self.hz and not self.stop_event.wait(1 / self.hz):
            try:
                snapshot = scrape(self.target)
            except SeatError:
                continue
            if snapshot:
                self.samples += 1
                for key in self.peak:
                    self.peak[key] = max(self.peak[key], snapshot.gauges.get(key, 0.0))

    def finish(self) -> dict:
        self.stop_event.set()
        self.join()
        return {**self.peak, "samples": self.samples, "hz": self.hz}


def wait_idle(target: Target, timeout: float = 60.0) -> metrics.Snapshot | None:
    deadline = time.monotonic() + timeout
    while True:
        snapshot = scrape(target)
        if snapshot is None or not (snapshot.gauges.get("running") or snapshot.gauges.get("waiting")):
            return snapshot
        if time.monotonic() > deadline:
            raise SeatError(
                f"{target.url} stayed busy for {timeout:.0f} s: another client is using it",
                "a batch-1 bench needs the server to itself",
            )
        time.sleep(0.2)


def after(
    target: Target, before: metrics.Snapshot, timeout: float = 10.0, finishes: int = 1, settle: float = 0.5
) -> metrics.Snapshot:
    """Counters once the frontend has recorded our requests' finishes, and the gauges have had
    `settle` seconds more to fall idle: a request still running then (another client's prefill,
    which no counter counts before its first token) overlapped ours."""
    deadline = time.monotonic() + timeout
    finished_at = None
    while True:
        after = scrape(target)
        if after is None:
            raise SeatError(
                f"{target.url}/metrics vanished during the bench",
                "the server restarted or something else now answers on its port",
            )
        now = time.monotonic()
        if finished_at is None and sum((after - before).success.values()) >= finishes:
            finished_at = now
        busy = after.gauges.get("running") or after.gauges.get("waiting")
        if (finished_at is not None and (not busy or now > finished_at + settle)) or now > deadline:
            return after
        time.sleep(0.05)
