"""Nsight Systems around the server, as the original launch script could: two modes, as knobs.

`profile` wraps the server in `nsys profile` with the original's flags (a timed capture from the
start); `session` starts it under `nsys launch --session-new=NAME`, so collection can be started and
stopped later (`seat bench --nsys` does, around one request). Traces go under the persistent cache
volume. The wrap goes between `env -u ...` and `vllm serve`: nothing else in the launch changes.
"""

from __future__ import annotations

import re

from seatkit import text
from seatkit.errors import SeatError
from seatkit.serve.words import Knob, Ref, Word

MODE = "SEAT_NSYS"
SESSION = "SEAT_NSYS_SESSION"
GRAPH_TRACE = "SEAT_NSYS_GRAPH_TRACE"
OUTPUT = "SEAT_NSYS_OUTPUT"
DURATION = "SEAT_NSYS_DURATION"
OFF = "off"


def _trace() -> list[Word]:
    return [
        ("--trace=cuda,nvtx,osrt",),
        ("--cuda-graph-trace=", Ref(GRAPH_TRACE)),
        ("--sample=none",),
        ("--cpuctxsw=none",),
    ]


def wraps() -> dict[str, list[Word]]:
    """Each mode's words before the server command; knobs inside them are Refs."""
    return {
        "profile": [
            ("nsys",),
            ("profile",),
            *_trace(),
            ("--duration=", Ref(DURATION)),
            ("--wait=primary",),
            ("--output=", Ref(OUTPUT)),
        ],
        "session": [("nsys",), ("launch",), ("--session-new=", Ref(SESSION)), *_trace()],
    }


def knobs(profile_name: str, cache_mount: str) -> list[Knob]:
    """The profiling knobs, each with its grammar; defaults follow the original script."""
    mount = cache_mount.replace(".", "[.]").replace("+", "[+]")  # a literal inside the pattern
    return [
        Knob(
            MODE,
            OFF,
            "Nsight Systems: off, profile (nsys profile from the start) or session "
            "(nsys launch; `seat bench --nsys` collects); compose: start service "
            "seat-nsys-profile or seat-nsys-session instead",
            pattern="off|profile|session",
            what="off, profile or session",
        ),
        Knob(
            SESSION,
            re.sub(r"[^A-Za-z0-9_]", "_", profile_name) + "_decode",
            "nsys session name (session mode)",
            pattern="[A-Za-z0-9_.-]{1,64}",
            what="an nsys session name (1 to 64 letters, digits and _ . -)",
        ),
        Knob(
            GRAPH_TRACE,
            "node",
            "nsys --cuda-graph-trace: node (each kernel) or graph (whole graphs)",
            pattern="node|graph",
            what="node or graph",
        ),
        Knob(
            OUTPUT,
            f"{cache_mount}/nsys/{profile_name}",
            "nsys output path inside the container, under the cache volume",
            pattern=mount + "/nsys/[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}",
            what=f"a file name of letters, digits and _ . - in {cache_mount}/nsys/",
        ),
        Knob(
            DURATION,
            "240",
            "seconds nsys profile collects (profile mode)",
            pattern="[1-9][0-9]{0,5}",
            what="a number of seconds from 1 to 999999",
        ),
    ]


NO_MODES = (
    "this profile has no Nsight Systems modes",
    "they need runtime docker with docker.cache (traces go under it)",
)


def refuse_unwrapped(environ: dict[str, str]) -> None:
    """A profile without the modes refuses SEAT_NSYS rather than launch without the profiler asked for."""
    if environ.get(MODE, OFF) != OFF:
        raise SeatError(f"{MODE}={text.one_line(environ[MODE])}: {NO_MODES[0]}", NO_MODES[1])


def session_of(argv: list[str]) -> dict | None:
    """The nsys session a container's command started the server in; None when not session mode."""
    for i, word in enumerate(argv[:-1]):
        if word == "nsys" and argv[i + 1] == "launch":
            names = [w.split("=", 1)[1] for w in argv[i + 2 :] if w.startswith("--session-new=")]
            if names:
                return {"session": names[0]}
    return None
