"""What the server will execute and import, resolved in an image the way it will be resolved: the
`env` and `vllm` its PATH finds, the script's interpreter, the folders Python searches before
site-packages, the healthcheck, and each locked file with what Python would load in its place."""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath

from seatkit.image.container_files import is_dir, read, same_as_base, stat, which
from seatkit.image.dockerfile import IMAGE_FILES
from seatkit.seat.overlay_lock import Lock

HEALTHCHECK = ["CMD", "/opt/seatkit/health.sh"]  # the Dockerfile's: it runs inside the seat all along
SHEBANG = re.compile(rb"#!(/\S+)[ \t]*\n")  # the `vllm` script's interpreter (the script itself: the base's)
ARCHES = ("x86_64", "aarch64")


def extensions(python: str) -> list[str]:
    """The suffixes of an extension module Python loads for a name (pythonX.Y's ABI)."""
    abi = python.replace("python", "").replace(".", "")
    return [".so", ".abi3.so", *(f".cpython-{abi}-{arch}-linux-gnu.so" for arch in ARCHES)]


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
    interpreter = script_interpreter(inside, venv)
    if not interpreter.startswith(f"{venv}/bin/python"):
        return problems + [f"{want} is not a script run by {venv}/bin/python"]
    if not same_as_base(inside, base, want):
        problems.append(f"{want} is not the base's")
    cfg, home = venv_config(inside, venv)
    if not home or not same_as_base(inside, base, f"{venv}/pyvenv.cfg"):
        return problems + [f"{venv}/pyvenv.cfg is missing or not the base's"]
    version = re.search(r"^version(?:_info)?\s*=\s*(\d+)\.(\d+)", cfg, re.M)
    if version and f"python{version[1]}.{version[2]}" != python:
        problems.append(f"{venv} runs python{version[1]}.{version[2]}: it imports no package from {python}")
    problems += _before_site_packages(inside, base, venv, python, PurePosixPath(home).parent)
    if not same_as_base(inside, base, interpreter):
        problems.append(f"{interpreter} (the interpreter) is not the base's")
    return problems


def script_interpreter(inside, venv: PurePosixPath) -> str:
    """The interpreter the venv's vllm script names on its #! line ('' when none)."""
    shebang = SHEBANG.match(read(inside, f"{venv}/bin/vllm") or b"")
    return shebang[1].decode(errors="replace") if shebang else ""


def venv_config(inside, venv: PurePosixPath) -> tuple[str, str | None]:
    """The venv's pyvenv.cfg, and its home: the folder of the interpreter it was made from, whose
    parent is the prefix Python takes its standard library from."""
    cfg = (read(inside, f"{venv}/pyvenv.cfg") or b"").decode(errors="replace")
    home = re.search(r"^home\s*=\s*(\S+)", cfg, re.M)
    return cfg, home[1] if home else None


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
    in its place: a package or an extension module of the same name, compiled bytecode the base
    did not ship (a planted .pyc with the source's size and time runs instead of it), or the base's
    own bytecode of a file the overlay replaced (stale, and run instead of the source when it is
    unchecked-hash or its recorded time and size match the new source's)."""
    at = PurePosixPath(vllm_dir)
    if (at.name, at.parent.name, at.parent.parent.parent.name) != ("vllm", "site-packages", "lib"):
        return [
            f"{vllm_dir} (image.vllm_dir) is not <venv>/lib/pythonX.Y/site-packages/vllm, what `vllm` imports"
        ]
    if not stat(inside, f"{vllm_dir}/__init__.py"):
        return [f"no vllm package at {vllm_dir} (image.vllm_dir)"]
    missing, changed, hidden = [], [], []
    stale: list[str] = []  # the base's bytecode of a replaced file
    for name, digest in sorted(lock.files.items()):
        path, data = f"{vllm_dir}/{name}", None
        if stat(inside, path) is None:
            missing.append(name)
        elif (data := read(inside, path, hops=0)) is None or hashlib.sha256(data).hexdigest() != digest:
            changed.append(name)  # a link is no locked file, wherever it points
        if not name.endswith(".py"):
            continue
        folder, stem = str(PurePosixPath(path).parent), PurePosixPath(name).stem
        instead = [f"{folder}/{stem}/__init__.py", *(f"{folder}/{stem}{s}" for s in extensions(python))]
        hidden += [p for p in instead if stat(inside, p)]
        planted, old = _cached(inside, base, path, python, data)
        hidden, stale = hidden + planted, stale + old
    kinds = {
        "missing": missing,
        "changed": changed,
        "loaded instead of a locked file": hidden,
        "kept stale from the base (Python may run it instead of the replaced source)": stale,
    }
    return [
        f"{len(names)} file(s) of {vllm_dir} {kind}: {listed(names)}"
        for kind, names in kinds.items()
        if names
    ]


def _cached(inside, base, path: str, python: str, source: bytes | None) -> tuple[list[str], list[str]]:
    """The bytecode Python may run instead of reading the source at path (source: the image's, as
    read): what the base did not ship, and the base's own once the source is not the base's (stale)."""
    at, abi = PurePosixPath(path), python.replace("python", "").replace(".", "")
    cached = [f"{at.parent}/__pycache__/{at.stem}.cpython-{abi}{opt}.pyc" for opt in ("", ".opt-1", ".opt-2")]
    planted, stale = [], []
    for pyc in filter(lambda p: stat(inside, p), cached):
        if not same_as_base(inside, base, pyc):
            planted.append(pyc)
        elif source is None or read(base, path, hops=0) != source:
            stale.append(pyc)
    return planted, stale


def kernels(inside, base, b12x_dir: str, python: str, lock: Lock) -> list[str]:
    """The bytecode Python may run instead of the b12x overlay's source (its files themselves are
    judged with the tree, by the lock's hashes)."""
    found = []
    for name in sorted(n for n in lock.files if n.endswith(".py")):
        path = f"{b12x_dir}/{name}"
        planted, stale = _cached(inside, base, path, python, read(inside, path, hops=0))
        found += planted + stale
    if not found:
        return []
    return [
        f"{len(found)} .pyc file(s) of {b12x_dir} may run instead of the b12x overlay's source: {listed(found)}"
    ]


def listed(names: list[str], most: int = 5) -> str:
    """The first few names, and how many more."""
    return ", ".join(names[:most]) + (f", +{len(names) - most} more" if len(names) > most else "")
