"""A native runtime venv as its hashed lock installed it, compared by its installed distributions.

`seat setup` installs the venv with pip --require-hashes --no-deps from the lock of its plan
(venv_locks/<native.venv>.txt: every distribution pinned by version and its wheel's SHA-256), then
records beside the venv (layout.venv_record: outside it, so no install through the venv rewrites
it) the lock's SHA-256 and every distribution the venv's own Python finds: name, version and the
SHA-256 of its RECORD as installed. The venv is as installed when both still hold: a distribution
pip-installed into it since, upgraded, removed or reinstalled from other files is a difference.
Files edited inside the venv on purpose are out of scope (docs/threat-model.md).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from seatkit import safe_yaml
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.seat import layout

LOCKS = Path(__file__).with_name("venv_locks")
SHOWN = 3

# Run by the venv's Python in isolated mode (no PYTHONPATH, no user site): what it imports from.
_LIST = """
import hashlib, importlib.metadata as m, json
found = []
for d in m.distributions():
    record = d.read_text("RECORD")
    digest = hashlib.sha256(record.encode()).hexdigest() if record is not None else ""
    found.append([d.metadata["Name"] or "", d.version or "", digest])
print(json.dumps(sorted(found)))
"""


def lock_file(venv_name: str) -> Path:
    """The hashed lock of a venv plan; refused when the kit ships none for it."""
    path = LOCKS / f"{venv_name}.txt"
    if not path.is_file():
        raise SeatError(
            f"the kit has no hashed lock for the venv {venv_name} (looked for {path})",
            "use a native section whose venv the kit locks, or a docker profile",
        )
    return path


def lock_sha256(venv_name: str) -> str:
    return hashlib.sha256(lock_file(venv_name).read_bytes()).hexdigest()


def distributions(venv: Path) -> list[list[str]]:
    """Each distribution the venv's Python finds, as [name, version, RECORD's SHA-256 or ""]."""
    try:
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-I", "-c", _LIST],
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",
        )
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        found = None
    if not isinstance(found, list):
        raise SeatError(
            f"the Python of {venv} could not list its distributions",
            f"remove {venv} and run `seat setup` again",
        )
    return found


def record(venv: Path, plan: dict) -> None:
    """Write the record of the venv just installed from its plan's lock."""
    data = {"plan": plan, "lock_sha256": lock_sha256(plan["venv"]), "distributions": distributions(venv)}
    write_atomic(layout.venv_record(venv), json.dumps(data, indent=1))


def recorded(venv: Path) -> dict | None:
    """The venv's install record, None when there is none or it is not one."""
    try:
        data = safe_yaml.read_json(layout.venv_record(venv), "venv record")
    except (OSError, ValueError, SeatError):
        return None
    keys = {"plan", "lock_sha256", "distributions"}
    return data if isinstance(data, dict) and keys <= set(data) else None


def differences(venv: Path, recorded_dists: list) -> list[str]:
    """How the venv's distributions now differ from the recorded ones, one line each."""
    was = {tuple(d) for d in recorded_dists}
    now = {tuple(d) for d in distributions(venv)}
    by_name = {d[0]: d for d in was}
    lines = []
    for name, version, _ in sorted(now - was):
        old = by_name.get(name)
        if old is None:
            lines.append(f"{name} {version} was installed since")
        elif old[1] != version:
            lines.append(f"{name} is {version}, installed as {old[1]}")
        else:
            lines.append(f"{name} {version} was reinstalled from other files")
    changed = {d[0] for d in now - was}
    lines += [f"{name} {version} is gone" for name, version, _ in sorted(was - now) if name not in changed]
    return lines


def summary(found: list[str]) -> str:
    more = f" (and {len(found) - SHOWN} more)" if len(found) > SHOWN else ""
    return "; ".join(found[:SHOWN]) + more
