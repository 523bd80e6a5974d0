"""`seat bench --nsys`: one measured request inside an Nsight Systems collection window.

The seat must run under `nsys launch --session-new=NAME` (SEAT_NSYS=session). Collection starts
(`nsys start`, inside the container) after the bench has seen the server idle, just before the
request is sent, and stops (`nsys stop`) just after its last byte, so the trace holds that request's
decode steps and nothing else the server did. The run folder's nsys.json puts the trace's path
beside the request's ms/step, its number of steps and the decode time the trace should show.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager, suppress
from pathlib import Path

from seatkit import engine
from seatkit.bench import request
from seatkit.bench.target import Options, Target
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.serve import bound, launch, nsys
from seatkit.serve import spec as specs


def container_argv(container) -> list[str]:
    config = container.attrs["Config"]
    return [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]


def session_of(profile: str) -> tuple[object, str, str]:
    """The seat's container, its nsys session and the output path to trace into; refuses when the
    seat was not launched in session mode (read from the container's own command)."""
    loaded = profiles.load(profile)
    profile = loaded.name
    running = bound.seat_of(loaded)
    if running is None or not launch.in_container(running):
        raise SeatError(
            f"--nsys needs a docker seat of {profile} started by `seat up`",
            f"SEAT_NSYS=session seat up {profile}",
        )
    container = engine.client().containers.get(running.ident)
    found = nsys.session_of(container_argv(container))
    if found is None:
        raise SeatError(
            f"{profile} was not launched in session mode: its command has no "
            "`nsys launch --session-new=...`, so there is no session to collect in",
            f"seat down {profile}; SEAT_NSYS=session seat up {profile}; then --nsys",
        )
    output = (running.nsys or {}).get(nsys.OUTPUT) or specs.build(loaded).values({})[nsys.OUTPUT]
    return container, found["session"], output


def _exec(container, argv: list[str], calls: list[dict]) -> None:
    from docker.errors import APIError

    try:
        done = container.exec_run(argv)
    except APIError as exc:  # the seat stopped or was removed mid-trace
        raise SeatError(
            f"`{' '.join(argv)}` could not run in the seat's container: {exc.explanation or exc}",
            "did the seat stop? `seat status`, then `seat logs PROFILE`",
        ) from None
    calls.append({"argv": argv, "exit_code": done.exit_code})
    if done.exit_code:
        raise SeatError(
            f"`{' '.join(argv)}` failed in the seat's container (exit {done.exit_code}): "
            f"{done.output.decode(errors='replace').strip()[-400:]}",
            "is Nsight Systems in the image, and the session still open?",
        )


def traced(
    target: Target,
    prompt: Prompt,
    options: Options,
    container,
    session: str,
    output: str,
    folder: Path,
) -> dict:
    """Measure one request between `nsys start` and `nsys stop`; write and return nsys.json."""
    output = f"{output}-{re.sub(r'[^A-Za-z0-9_.-]', '_', folder.name)}"
    calls: list[dict] = []

    @contextmanager
    def window():
        try:
            _exec(container, ["nsys", "start", f"--session={session}", f"--output={output}"], calls)
        except KeyboardInterrupt:  # the exec may have started collection: leave none running
            with suppress(SeatError):
                _exec(container, ["nsys", "stop", f"--session={session}"], calls)
            raise
        try:
            yield
        finally:
            _exec(container, ["nsys", "stop", f"--session={session}"], calls)

    record = request.measure(target, prompt, options, around=window)
    f = record["factors"]
    steps, decode_ms, ms_per_step = f.get("decode_steps"), f.get("decode_ms"), f.get("ms_per_step")
    result = {
        "trace": f"{output}.nsys-rep (inside the container; the cache volume holds it)",
        "trace_path": f"{output}.nsys-rep",
        "session": session,
        "container": container.id,
        "commands": calls,
        "request": {
            "suite": prompt.suite,
            "prompt": prompt.name,
            "exclusive": record["exclusive"],
            **{k: f.get(k) for k in ("ms_per_step", "decode_steps", "decode_ms", "tokens_per_step")},
            **{k: f.get(k) for k in ("decode_tok_s", "completion_tokens")},
        },
        "expect": (
            f"the trace should show {steps:.0f} decode steps over about {decode_ms:.1f} ms "
            f"({ms_per_step:.3f} ms per step)"
            if steps and ms_per_step
            else "the server gave no step counters: the trace's steps cannot be predicted"
        ),
        "record": record,
    }
    (folder / "nsys.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
