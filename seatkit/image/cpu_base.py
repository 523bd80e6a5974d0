"""A vLLM CPU base image made on this machine, for rigs and CI runs that reach no container registry.

Debian from Debian's own packages (mmdebstrap), its Python, and the native cpu-smoke install plan
(the same pinned packages, constraints, removals and metadata shim as `seat setup`) in a venv at
/opt/venv. The wheels come from the host's pip (its cache and configured sources) into a wheelhouse
kept in SEAT_HOME, so a second build downloads nothing; an image already tagged is reused as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from seatkit.errors import SeatError
from seatkit.seat import layout
from seatkit.seat.sections import Native

RELEASE = "bookworm"
# python3.11 matches the host interpreter the wheels are resolved with; curl serves the healthcheck;
# torch and tokenizers link libstdc++, vLLM's CPU backend libnuma; torch.compile (inductor), which
# vLLM runs on CPU at start, builds its kernels with g++ against Python's headers.
PACKAGES = ["python3", "python3-venv", "python3-dev", "g++", "curl", "libnuma1", "libstdc++6"]
VENV = "/opt/venv"
PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
Progress = Callable[[str], None]


def _hash(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def plan_hash(native: Native) -> str:
    """Names the image's recipe: Debian's part and the pip plan; a changed recipe is another image."""
    return _hash({"release": RELEASE, "packages": PACKAGES, "plan": native.model_dump()})


def wheelhouse(native: Native, say: Progress) -> Path:
    """Every wheel the plan installs, resolved by the host's pip; made once per plan."""
    folder = layout.wheelhouse(f"{native.venv}-{_hash(native.model_dump())}")
    done = folder / ".complete"
    if done.exists():
        return folder
    if shutil.which(native.python) is None:
        raise SeatError(
            f"{native.python} not found: the wheels are resolved with the image's Python version",
            "install it, or set native.python in the profile",
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "constraints.txt").write_text("".join(f"{c}\n" for c in native.constraints))
    argv = [
        native.python,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--disable-pip-version-check",
        "-w",
        str(folder),
        "-c",
        str(folder / "constraints.txt"),
        *native.packages,
    ]
    _run(argv, "resolving and fetching the wheels", say)
    done.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
    return folder


def mirror() -> str:
    """The Debian mirror apt already uses here (no host name is written into the kit)."""
    for sources in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    listing = Path("/etc/apt/sources.list")
    for line in listing.read_text().splitlines() if listing.exists() else []:
        if line.startswith("deb "):
            return line.split()[1]
    raise SeatError("no Debian mirror is configured in /etc/apt", "configure apt, then build again")


def _hooks(native: Native, wheels: Path) -> list[str]:
    """mmdebstrap customize hooks: shell commands run on the host with the new root as "$1"."""
    pip = (
        f'chroot "$1" {VENV}/bin/pip install -q --no-cache-dir --no-index --find-links /tmp/wheels '
        f"-c /tmp/wheels/constraints.txt"
    )
    hooks = [
        f'mkdir -p "$1/tmp/wheels" && (cp -al {shlex.quote(str(wheels))}/. "$1/tmp/wheels" '
        f'|| cp -a {shlex.quote(str(wheels))}/. "$1/tmp/wheels")',
        f'chroot "$1" python3 -m venv {VENV}',
    ]
    # One package per call, in order, as `seat setup` does: torch resolves alone first.
    hooks += [f"{pip} {shlex.quote(package)}" for package in native.packages]
    if native.remove:
        hooks.append(
            f'chroot "$1" {VENV}/bin/pip uninstall -q -y {" ".join(map(shlex.quote, native.remove))}'
        )
    if native.metadata_shim:
        dist = f'"$1"{VENV}/lib/python3.11/site-packages/vllm-{native.metadata_shim}.dist-info'
        hooks.append(
            f"mkdir -p {dist} && printf 'Metadata-Version: 2.1\\nName: vllm\\nVersion: %s\\n' "
            f"{shlex.quote(native.metadata_shim)} > {dist}/METADATA"
        )
    hooks.append(
        'rm -rf "$1/tmp/wheels" "$1"/etc/apt/sources.list "$1"/etc/apt/sources.list.d/* "$1/root/.cache"'
    )
    return hooks


def build(tag: str, native: Native, say: Progress = print) -> dict:
    """Make the image under tag unless it exists; returns what was done and how long each part took."""
    if _docker("image", "inspect", tag).returncode == 0:
        return {"tag": tag, "built": False, "seconds": {}}
    if shutil.which("mmdebstrap") is None:
        raise SeatError("mmdebstrap is not installed", "apt-get install mmdebstrap")
    seconds = {}
    start = time.monotonic()
    wheels = wheelhouse(native, say)
    seconds["wheels"] = round(time.monotonic() - start, 1)
    argv = [
        "mmdebstrap",
        "--variant=essential",
        f"--include={','.join(PACKAGES)}",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        *[f"--customize-hook={hook}" for hook in _hooks(native, wheels)],
        RELEASE,
        "-",
        mirror(),
    ]
    env = [
        f"PATH={PATH}",
        f"VIRTUAL_ENV={VENV}",
        # vLLM asks for Intel OpenMP when speculating on CPU, as vLLM's own CPU image preloads it
        f"LD_PRELOAD={VENV}/lib/libiomp5.so",
    ]
    # Imported untagged, and tagged only once the root was made whole: the tag is what marks it made.
    importer = ["docker", "import", *[a for e in env for a in ("-c", f"ENV {e}")], "-"]
    say(
        f"building {tag}: Debian {RELEASE}, {', '.join(native.packages)} (mmdebstrap, pip from the wheelhouse)"
    )
    start = time.monotonic()
    log = layout.base_log(tag)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as fh:
        # The host's pip settings name host paths: the image's pip installs from the wheelhouse alone.
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        root = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=fh, env=clean)
        imported = subprocess.run(importer, stdin=root.stdout, capture_output=True, text=True)
        if root.stdout:  # stdout=PIPE: the importer has it now
            root.stdout.close()
        made = root.wait()
    image = imported.stdout.strip()
    if made or imported.returncode or _docker("tag", image, tag).returncode:
        if image:
            _docker("image", "rm", image)
        tail = "".join(log.read_text(errors="replace").splitlines(True)[-20:])
        raise SeatError(
            f"building the base image {tag} failed:\n{tail}{imported.stderr[-500:]}", f"full log: {log}"
        )
    seconds["root_and_import"] = round(time.monotonic() - start, 1)
    return {"tag": tag, "built": True, "seconds": seconds}


def _run(argv: list[str], what: str, say: Progress) -> None:
    say(what)
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise SeatError(
            f"{what} failed (exit {done.returncode}):\n{done.stderr[-1500:]}",
            "fix the cause above and run again; finished parts are kept",
        )


def _docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True)
