"""Every layer of a seat, in order; each check is a small function in its layer's module."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from seatkit.doctor import bench, gpu, gpu_readings, image, models, server
from seatkit.doctor import host as host_rows
from seatkit.doctor.rows import cannot, exit_code, worst
from seatkit.errors import SeatError
from seatkit.host import status as host_status
from seatkit.seat import host_profiles, profiles
from seatkit.serve import spec as specs


def diagnose(
    profile_name: str, host_profile: str = "paper", runs: Path = Path("runs"), readings: dict | None = None
) -> dict:
    """All rows, their worst status and the exit code (0 none failed, 1 a FAIL)."""
    profile = profiles.load(profile_name)
    host = host_profiles.load(host_profile)
    nv = gpu_readings.read() if readings is None else readings
    status = host_status.status(host) if profile.gpus.count else {}
    inside = host_rows.container() if "error" in nv and profile.gpus.count else None
    rows = gpu.rows(nv, profile, host, inside) + host_rows.rows(status, profile)
    seat = server.seat(profile)  # once: the image and server rows judge the same seat
    running = None if isinstance(seat, list) else seat
    try:
        rows += image.rows(profile, specs.build(profile).values().get("SEAT_IMAGE"), running)
    except SeatError as exc:  # a broken models lock, say: the models rows show it, the other layers go on
        rows.append(cannot("image", "image", f"the launch spec does not build: {exc.message}", exc.hint))
    rows += models.rows(profile) + server.rows(profile, seat)
    rows += bench.rows(profile, runs, rows)
    return {
        "profile": profile.name,
        "host_profile": host.name if profile.gpus.count else None,  # a CPU seat's host is not judged
        "nvml": nv,
        "rows": [asdict(r) for r in rows],
        "status": worst(rows),
        "exit_code": exit_code(rows),
    }
