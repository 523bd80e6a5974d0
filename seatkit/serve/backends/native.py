"""The native runtime: the seat is a process group started from the profile's venv.

A native seat is its PID with its start time in its boot: a PID recycled since names a stranger,
never signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from seatkit.errors import SeatError
from seatkit.seat import what_runs
from seatkit.serve import identity, runtime
from seatkit.serve.running import Running
from seatkit.serve.spec import LaunchSpec, resolve


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:  # no procfs: start times are all there is
        return ""


def process_start(pid: int) -> str | None:
    """When a live (not zombie) process started, in clock ticks since boot; None when gone.

    A recycled PID gets another start time, so the pair names exactly the process `up` started.
    Unlike its command line, this is readable at every instant, even in the middle of an exec.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def inherited() -> dict[str, str]:
    """What of this shell's environment the server keeps (what_runs.yaml shell_kept): PATH, the
    user's own folders, the kit's knobs and the locale. The profile alone sets the rest, as in a
    container: a PYTHONPATH or LD_PRELOAD left exported never reaches the server."""
    return {k: v for k, v in os.environ.items() if what_runs.from_shell(k)}


def spawn(spec: LaunchSpec, values: dict[str, str], log: Path, env: dict) -> str:
    """Start the server in its own session, its output into the log; its PID."""
    run_env = {**inherited(), **spec.env, **env}
    venv = resolve(spec.venv or (), values)
    iomp = Path(venv) / "lib" / "libiomp5.so"
    native = spec.profile.native
    if native is not None and native.preload_iomp and iomp.exists():
        run_env["LD_PRELOAD"] = ":".join(
            filter(None, [str(iomp), spec.env.get("LD_PRELOAD")])
        )  # as the script
    argv = [resolve(w, values) for w in spec.command]
    with log.open("ab") as fh:
        try:
            # Its own session, so `down` can stop the server and every worker it forked; in /,
            # since a worker Python spawns imports from its working directory first, where the
            # caller's folder could shadow a module of the venv (multiprocessing/, torch.py).
            proc = subprocess.Popen(
                argv,
                cwd="/",
                env=run_env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:  # ENOENT here also means a script whose interpreter is gone
            raise SeatError(
                f"could not start {argv[0]}: {exc.strerror}",
                f"run `seat setup {spec.profile.name}` to make its runtime again",
            ) from None
    return str(proc.pid)


def _reap(pid: int) -> None:
    """Collect the exit status when this process started the server (no zombie left behind)."""
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def venv_mark(spec: LaunchSpec, values: dict[str, str]) -> str | None:
    """Why the seat's venv is not the one `seat setup` installed from the profile's hashed lock
    (another plan's or lock's, no install record, a distribution other than recorded:
    runtime.venv_problem), None when it is."""
    native = spec.profile.native
    if native is None or spec.venv is None:
        return None
    problem = runtime.venv_problem(native, Path(resolve(spec.venv, values)))
    return f"{problem[1]} (seat setup {spec.profile.name} installs it as planned)" if problem else None


class Native:
    container = False

    def prepared(self, spec: LaunchSpec, values: dict[str, str], image_check) -> tuple[dict, str | None]:
        return values, venv_mark(spec, values)

    def start(
        self,
        spec: LaunchSpec,
        values: dict[str, str],
        env: dict[str, str],
        run: Running,
        record: Callable[[Running], None],
    ) -> None:
        run.ident = spawn(spec, values, Path(run.log), env)
        run.since = process_start(int(run.ident)) or ""
        record(run)

    def alive(self, run: Running) -> bool:
        return (
            bool(run.since)
            and (not run.boot or run.boot == boot_id())
            and process_start(int(run.ident)) == run.since
        )

    def listeners(self, run: Running) -> list[int]:
        return identity.session_pids(int(run.ident))

    def stop(self, run: Running, grace: float) -> bool:
        was_alive = self.alive(run)  # its PID, start time and boot: never a recycled PID
        pid = int(run.ident)
        if was_alive:
            _signal_group(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self.alive(run) and time.monotonic() < deadline:
                time.sleep(0.2)
            # The workers share the server's process group: end any that outlived it. Only
            # while the group was ours: a recycled PID may lead someone else's group.
            _signal_group(pid, signal.SIGKILL)
            deadline = time.monotonic() + grace  # a killed process leaves /proc a moment later
            while identity.session_pids(pid) and time.monotonic() < deadline:  # its session: its group
                time.sleep(0.1)
        _reap(pid)
        return was_alive

    def save_log(self, run: Running) -> None:
        """The server writes its log where `up` keeps it."""

    def logs(self, run: Running, follow: bool) -> Iterator[bytes]:
        try:
            fh = open(run.log, "rb")
        except OSError as exc:
            raise SeatError(
                f"the log of {run.profile} cannot be read: {run.log} ({exc.strerror})",
                f"seat status {run.profile}; `seat up` starts a new log",
            ) from None
        with fh:
            while True:
                chunk = fh.read(65536)
                if chunk:
                    yield chunk
                elif not follow or not self.alive(run):
                    return
                else:
                    time.sleep(0.3)

    def unrecorded(self, profile: str) -> list[Running]:
        return []  # a process group is found by its record alone

    def describe(self, run: Running) -> str:
        return f"process id {run.ident}"


BACKEND = Native()
