"""What the server will execute and import, resolved in an image the way it will be resolved: the
`env` and `vllm` its PATH finds, the script's interpreter, the folders Python searches before
site-packages, the healthcheck, the mounts as the image's links place them, and each locked file
with what Python would load in its place."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import PurePosixPath

from seatkit.image.container_files import is_dir, lands, read, same_as_base, stat, which
from seatkit.image.dockerfile import IMAGE_FILES
from seatkit.seat import what_runs
from seatkit.seat.overlay_lock import Lock

HEALTHCHECK = ["CMD", "/opt/seatkit/health.sh"]  # the Dockerfile's: it runs inside the seat all along
SHEBANG = re.compile(rb"#!(/\S+)[ \t]*\n")  # the `vllm` script's interpreter (the script itself: the base's)
ARCHES = ("x86_64", "aarch64")


def extensions(python: str) -> list[str]:
    """The suffixes of an extension module Python loads for a name (pythonX.Y's ABI)."""
    abi = python.replace("python", "").replace(".", "")
    return [".so", ".abi3.so", *(f".cpython-{abi}-{arch}-linux-gnu.so" for arch in ARCHES)]


def mounts_land(inside, mounts: dict[str, str], vllm_dir: str, b12x_dir: str, cwd: str) -> list[str]:
    """A mount target the profile may name that the image links onto the import or exec path, or
    that puts a standard-library name in the working directory (mounts: by the field naming each): a spawned worker (python -c)
    imports multiprocessing and its helpers with the working directory first on sys.path."""
    problems = []
    cwd_path = what_runs.where(cwd)
    for name, target in mounts.items():
        landed = lands(inside, target)
        why = what_runs.refused_mount(f"{name} (at {landed} in this image)", landed, vllm_dir, b12x_dir)
        if landed != str(what_runs.where(target)) and why:
            problems.append(why)
        at = PurePosixPath(landed)
        stdlib_name = at.name.split(".")[0] in sys.stdlib_module_names
        if at in (cwd_path, *cwd_path.parents) or at.parent == cwd_path and stdlib_name:
            problems.append(
                f"{name} {target}: it puts {at.name} in the working directory {cwd_path}, where a "
                "spawned worker imports the standard library from first"
            )
    return problems


def healthcheck(inside, base, config: dict, search: str) -> list[str]:
    """What the engine runs inside the seat every interval, beside the server: the kit's script,
    and the curl or wget it runs the base's."""
    test = (config.get("Healthcheck") or {}).get("Test")
    if test in (None, ["NONE"]):
        return []
    if test != HEALTHCHECK:
        return [f"its healthcheck runs {test}, not {HEALTHCHECK} (it runs inside the seat all along)"]
    problems = []
    if read(inside, HEALTHCHECK[1]) != (IMAGE_FILES / "health.sh").read_bytes():
        problems.append(f"{HEALTHCHECK[1]} (the healthcheck) is not the kit's image/health.sh")
    for tool in filter(None, (which(inside, name, search) for name in ("curl", "wget"))):
        if not same_as_base(inside, base, tool):
            problems.append(f"{tool} (what the healthcheck runs) is not the base's")
    return problems


def resolved(inside, base, search: str, venv: PurePosixPath, python: str) -> list[str]:
    """`env` and `vllm` as execvp finds them on the image's PATH, the script's interpreter, and
    what Python finds before site-packages."""
    problems = []
    found_env = which(inside, "env", search)
    if found_env is None:
        problems.append(f"PATH {search} finds no env, which runs the server")
    for name in filter(None, ("/bin/sh", found_env)):
        if not same_as_base(inside, base, name):
            problems.append(f"{name} (what runs the entrypoint and the server) is not the base's")
    found = which(inside, "vllm", search)
    want = f"{venv}/bin/vllm"
    if found != want:
        return problems + [f"PATH {search} finds vllm at {found}, not the venv's {want}"]
    shebang = SHEBANG.match(read(inside, want) or b"")
    interpreter = shebang[1].decode(errors="replace") if shebang else ""
    if not interpreter.startswith(f"{venv}/bin/python"):
        return problems + [f"{want} is not a script run by {venv}/bin/python"]
    if not same_as_base(inside, base, want):
        problems.append(f"{want} is not the base's")
    cfg = (read(inside, f"{venv}/pyvenv.cfg") or b"").decode(errors="replace")
    home = re.search(r"^home\s*=\s*(\S+)", cfg, re.M)
    if not home or not same_as_base(inside, base, f"{venv}/pyvenv.cfg"):
        return problems + [f"{venv}/pyvenv.cfg is missing or not the base's"]
    version = re.search(r"^version(?:_info)?\s*=\s*(\d+)\.(\d+)", cfg, re.M)
    if version and f"python{version[1]}.{version[2]}" != python:
        problems.append(f"{venv} runs python{version[1]}.{version[2]}: it imports no package from {python}")
    problems += _before_site_packages(inside, base, venv, python, PurePosixPath(home[1]).parent)
    if not same_as_base(inside, base, interpreter):
        problems.append(f"{interpreter} (the interpreter) is not the base's")
    return problems


def _before_site_packages(inside, base, venv: PurePosixPath, python: str, prefix: PurePosixPath) -> list[str]:
    """A vllm module in a folder of sys.path before site-packages (the script's folder, the
    standard library and its extensions), and the customize modules `site` runs at every start."""
    problems = []
    before = [
        f"{venv}/bin",
        f"{prefix}/lib/{python.replace('.', '')}.zip",
        f"{prefix}/lib/{python}",
        f"{prefix}/lib/{python}/lib-dynload",
    ]
    for folder in before:
        for name in ("vllm", "vllm.py", "vllm.pyc", *(f"vllm{s}" for s in extensions(python))):
            found = stat(inside, f"{folder}/{name}")
            # a folder named vllm is a package; a file named vllm (the script itself) is no module
            if found and (name != "vllm" or is_dir(found)):
                problems.append(f"{folder}/{name} is imported as vllm before site-packages")
    for folder in [*before, f"{venv}/lib/{python}/site-packages"]:
        for name in ("sitecustomize.py", "usercustomize.py"):
            if stat(inside, f"{folder}/{name}") and not same_as_base(inside, base, f"{folder}/{name}"):
                problems.append(f"{folder}/{name} runs at every start and is not the base's")
    return problems


def package(inside, base, vllm_dir: str, python: str, lock: Lock) -> list[str]:
    """Each locked file at the profile's vllm_dir, read one by one, and anything Python would load
    in its place: a package or an extension module of the same name, or compiled bytecode the
    base did not ship (a planted .pyc with the source's size and time runs instead of it)."""
    at = PurePosixPath(vllm_dir)
    if (at.name, at.parent.name, at.parent.parent.parent.name) != ("vllm", "site-packages", "lib"):
        return [
            f"{vllm_dir} (image.vllm_dir) is not <venv>/lib/pythonX.Y/site-packages/vllm, what `vllm` imports"
        ]
    if not stat(inside, f"{vllm_dir}/__init__.py"):
        return [f"no vllm package at {vllm_dir} (image.vllm_dir)"]
    abi = python.replace("python", "").replace(".", "")
    missing, changed, hidden = [], [], []
    for name, digest in sorted(lock.files.items()):
        path = f"{vllm_dir}/{name}"
        if stat(inside, path) is None:
            missing.append(name)
        elif (data := read(inside, path, hops=0)) is None or hashlib.sha256(data).hexdigest() != digest:
            changed.append(name)  # a link is no locked file, wherever it points
        if not name.endswith(".py"):
            continue
        folder, stem = str(PurePosixPath(path).parent), PurePosixPath(name).stem
        instead = [f"{folder}/{stem}/__init__.py", *(f"{folder}/{stem}{s}" for s in extensions(python))]
        cached = [f"{folder}/__pycache__/{stem}.cpython-{abi}{opt}.pyc" for opt in ("", ".opt-1", ".opt-2")]
        hidden += [p for p in instead if stat(inside, p)]
        hidden += [p for p in cached if stat(inside, p) and not same_as_base(inside, base, p)]
    kinds = {"missing": missing, "changed": changed, "loaded instead of a locked file": hidden}
    return [
        f"{len(names)} file(s) of {vllm_dir} {kind}: {listed(names)}"
        for kind, names in kinds.items()
        if names
    ]


def listed(names: list[str], most: int = 5) -> str:
    """The first few names, and how many more."""
    return ", ".join(names[:most]) + (f", +{len(names) - most} more" if len(names) > most else "")
