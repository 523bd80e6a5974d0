"""Nsight Systems around the server, as the original launch script could: two modes, as knobs.

`profile` wraps the server in `nsys profile` with the original's flags (a timed capture from the
start); `session` starts it under `nsys launch --session-new=NAME`, so collection can be started and
stopped later (`seat bench --nsys` does, around one request). Traces go under the persistent cache
volume. The wrap goes between `env -u ...` and `vllm serve`: nothing else in the launch changes.
"""

from __future__ import annotations

import re

from seatkit.errors import SeatError

MODE = "SEAT_NSYS"
SESSION = "SEAT_NSYS_SESSION"
GRAPH_TRACE = "SEAT_NSYS_GRAPH_TRACE"
OUTPUT = "SEAT_NSYS_OUTPUT"
DURATION = "SEAT_NSYS_DURATION"
OFF = "off"


def _ref(name: str):
    from seatkit.serve.spec import Ref  # spec imports this module

    return Ref(name)


def _trace() -> list[tuple]:
    return [
        ("--trace=cuda,nvtx,osrt",),
        ("--cuda-graph-trace=", _ref(GRAPH_TRACE)),
        ("--sample=none",),
        ("--cpuctxsw=none",),
    ]


def wraps() -> dict[str, list[tuple]]:
    """Each mode's words before the server command; knobs inside them are Refs."""
    return {
        "profile": [
            ("nsys",),
            ("profile",),
            *_trace(),
            ("--duration=", _ref(DURATION)),
            ("--wait=primary",),
            ("--output=", _ref(OUTPUT)),
        ],
        "session": [("nsys",), ("launch",), ("--session-new=", _ref(SESSION)), *_trace()],
    }


def knobs(profile_name: str, cache_mount: str) -> list[tuple[str, str, str]]:
    """(name, default, meaning) of the profiling knobs; defaults follow the original script."""
    return [
        (
            MODE,
            OFF,
            "Nsight Systems: off, profile (nsys profile from the start) or session "
            "(nsys launch; `seat bench --nsys` collects); compose: start service "
            "seat-nsys-profile or seat-nsys-session instead",
        ),
        (
            SESSION,
            re.sub(r"[^A-Za-z0-9_]", "_", profile_name) + "_decode",
            "nsys session name (session mode)",
        ),
        (GRAPH_TRACE, "node", "nsys --cuda-graph-trace: node (each kernel) or graph (whole graphs)"),
        (
            OUTPUT,
            f"{cache_mount}/nsys/{profile_name}",
            "nsys output path inside the container, under the cache volume",
        ),
        (DURATION, "240", "seconds nsys profile collects (profile mode)"),
    ]


def grammar(cache_mount: str) -> dict[str, str]:
    """Each knob's value as a regular expression that Python and bash's [[ =~ ]] read alike."""
    return {
        MODE: "off|profile|session",
        SESSION: "[A-Za-z0-9_.-]{1,64}",
        GRAPH_TRACE: "node|graph",
        OUTPUT: cache_mount.replace(".", "[.]") + "/nsys/[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}",
        DURATION: "[1-9][0-9]{0,5}",
    }


NO_MODES = (
    "this profile has no Nsight Systems modes",
    "they need runtime docker with docker.cache (traces go under it)",
)


def refuse_unwrapped(environ: dict[str, str]) -> None:
    """A profile without the modes refuses SEAT_NSYS rather than launch without the profiler asked for."""
    if environ.get(MODE, OFF) != OFF:
        raise SeatError(f"{MODE}={environ[MODE]!r}: {NO_MODES[0]}", NO_MODES[1])


def check(rules: dict[str, str], values: dict[str, str]) -> None:
    for name, rule in rules.items():
        if not re.fullmatch(f"({rule})", values[name]):
            raise SeatError(f"{name}={values[name]!r} is not valid", f"expected: {rule}")


def session_of(argv: list[str]) -> dict | None:
    """The nsys session a container's command started the server in; None when not session mode."""
    for i, word in enumerate(argv[:-1]):
        if word == "nsys" and argv[i + 1] == "launch":
            names = [w.split("=", 1)[1] for w in argv[i + 2 :] if w.startswith("--session-new=")]
            if names:
                return {"session": names[0]}
    return None
