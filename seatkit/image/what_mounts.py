"""Where a seat's mounts land in its image, and what of the image they may not cover, read from
outside it: the folders of its PATH, the interpreter the server runs and the prefix it was
installed in, the folders the dynamic loader finds libraries in, OpenSSL's config and what it
names, and the caches of compiled code under the container's own HOME (its user's, from the
image's env or /etc/passwd), TMPDIR and cache names. A profile is judged at the usual places
(seatkit.seat.what_runs: /usr, /lib*, root's HOME); an image may keep them elsewhere (/opt/conda,
/opt/hpcx, /home/vllm), and says where."""

from __future__ import annotations

import posixpath
import re
import sys
from fnmatch import fnmatchcase
from glob import has_magic
from pathlib import PurePosixPath

from seatkit.image import what_loads
from seatkit.image.container_files import lands, names, read, which
from seatkit.seat import what_runs
from seatkit.seat.sections import Image

LD_CACHE = b"glibc-ld.so.cache1.1"  # the format glibc's loader reads (header 48 bytes, entries 24)


def home(inside, env: dict[str, str], user: str) -> str:
    """HOME as the runtime (runc) sets it in a container of the image: the env's, else the home of
    the image's user (name or uid, before any :group) in its /etc/passwd, else /."""
    if env.get("HOME"):
        return env["HOME"]
    name = user.partition(":")[0] or "root"
    for line in (read(inside, "/etc/passwd") or b"").decode(errors="replace").splitlines():
        fields = line.split(":")
        if len(fields) >= 7 and name in (fields[0], fields[2]):
            return fields[5] or "/"
    return "/"


def derived(
    inside, env: dict[str, str], search: str, user: str, cwd: str, image: Image, cache_mount: str | None
) -> dict[str, str]:
    """The image's own paths a mount may not cover, and the profile's, each as named and where the
    image's links put it. A cache inside the kit's cache mount is the kit's (a profile points them
    there)."""
    site = PurePosixPath(image.vllm_dir).parent  # <venv>/lib/pythonX.Y/site-packages/vllm
    venv = site.parent.parent.parent
    found = {
        entry: "a folder of PATH, where execvp finds env and vllm"
        for entry in search.split(":")
        if entry.startswith("/")
    }
    programs = ["/bin/sh", *filter(None, (which(inside, n, search) for n in ("env", "vllm", "curl", "wget")))]
    found |= dict.fromkeys(programs, "a program that starts the server or checks it")
    prefix = _prefix(inside, venv)
    found |= _interpreter(inside, venv, prefix) | _loader(inside, env, cwd) | _openssl(inside, env, prefix)
    found |= _pth_folders(inside, site)
    mount = what_runs.where(cache_mount) if cache_mount else None
    caches = what_runs.cache_folders({**env, "HOME": home(inside, env, user)})
    found |= {
        path: why
        for path, why in caches.items()
        if not (mount and mount in (what_runs.where(path), *what_runs.where(path).parents))
    }
    out: dict[str, str] = {}
    for path, why in found.items():
        out.setdefault(str(what_runs.where(path)), why)
        out.setdefault(lands(inside, path), why)
    for path, why in what_runs.protected(image.vllm_dir, image.b12x_dir).items():  # named: judged there
        if not has_magic(path):
            out.setdefault(lands(inside, path), why)
    return out


def _pth_folders(inside, site: PurePosixPath) -> dict[str, str]:
    """The folders site-packages' .pth files put on sys.path (an editable install's source tree,
    easy-install.pth): the server imports packages from each. A line that starts with `import`
    runs code, and is the outside check's to judge (a .pth the base lacks is refused there)."""
    found = {}
    for name in names(inside, str(site)):
        if not name.endswith(".pth"):
            continue
        for line in (read(inside, f"{site}/{name}") or b"").decode(errors="replace").splitlines():
            entry = line.strip()
            if entry and not entry.startswith(("#", "import ", "import\t")):
                folder = posixpath.normpath(posixpath.join(str(site), entry))
                found[folder] = f"a folder {name} puts on sys.path, where the server imports from"
    return found


def _prefix(inside, venv: PurePosixPath) -> str | None:
    """The prefix the venv's interpreter was installed in: its pyvenv.cfg home's parent, where the
    image's links put it (none for /, the data's /bin and /lib*)."""
    home = what_loads.venv_config(inside, venv)[1]
    prefix = str(PurePosixPath(lands(inside, home)).parent) if home and home.startswith("/") else "/"
    return None if prefix == "/" else prefix


def _interpreter(inside, venv: PurePosixPath, prefix: str | None) -> dict[str, str]:
    """The interpreter the venv's vllm script runs, where its links put it (/usr/local/bin/python3.12,
    /opt/conda/bin/python3.11), and its prefix: the standard library, the headers a JIT build
    compiles with, its shared libraries, a conda's OpenSSL and its config."""
    found = {}
    named = what_loads.script_interpreter(inside, venv)
    if named.startswith("/"):
        found[lands(inside, named)] = "the interpreter the server runs"
    if prefix:
        found[prefix] = "the interpreter's prefix: its standard library, headers and shared libraries"
    return found


def _openssl(inside, env: dict[str, str], prefix: str | None) -> dict[str, str]:
    """OpenSSL's config (the data's places, the prefix's, the env's OPENSSL_CONF), each path it
    names, and the engine and provider folders the env names: Python's ssl reads the config, and
    loads the engines and providers it names into the server."""
    data = what_runs.openssl()
    set_by_env = {env[n]: f"OpenSSL's {n}" for n in data["env"] if env.get(n, "").startswith("/")}
    configs = [*data["configs"], *([f"{prefix}/{data['prefix']}"] if prefix else [])]
    configs += [env["OPENSSL_CONF"]] if "OPENSSL_CONF" in set_by_env else []
    found = {c: "OpenSSL's config, whose engines and providers are loaded into the server" for c in configs}
    named = [path for config in configs for path in _openssl_names(inside, config, 4)]
    return found | set_by_env | dict.fromkeys(named, "named by OpenSSL's config: loaded into the server")


def _openssl_names(inside, path: str, depth: int) -> list[str]:
    """The absolute paths an OpenSSL config names (engines' dynamic_path, providers' module, a
    pkcs11 MODULE_PATH, .include), with those of the files it includes (a file, or a folder's
    *.cnf and *.conf)."""
    data = read(inside, path)
    if data is None:  # a folder (or none): its config files
        files = [f"{path}/{n}" for n in names(inside, path) if n.endswith((".cnf", ".conf"))] if depth else []
        return [named for file in files for named in _openssl_names(inside, file, depth - 1)]
    found = []
    for line in data.decode(errors="replace").splitlines():
        line = line.partition("#")[0].strip()
        include = line.startswith(".include")
        value = (line[8:].lstrip(" \t=") if include else line.partition("=")[2]).strip().strip("\"'")
        if re.fullmatch(r"/[^\s=$]*", value):  # a path, not a DN (/CN=...) nor a $variable's
            found.append(value)
            found += _openssl_names(inside, value, depth - 1) if include and depth else []
    return found


def _loader(inside, env: dict[str, str], cwd: str) -> dict[str, str]:
    """What the dynamic loader loads into the server: the files of LD_PRELOAD, and the folders of
    LD_LIBRARY_PATH (a relative entry, or an empty one, is the working directory's), of its cache
    (/etc/ld.so.cache) and of the ld.so.conf ldconfig rebuilds the cache from (the GPU runtime's
    hook runs ldconfig in each new container). Of / itself, only what the loader looks up there."""
    libraries = env.get("LD_LIBRARY_PATH")
    folders = (
        [f"{cwd}/{f}" if not f.startswith("/") else f for f in libraries.split(":")] if libraries else []
    )
    folders += _cached(read(inside, "/etc/ld.so.cache") or b"") + _conf(inside, "/etc/ld.so.conf", 4)
    found = {}
    for folder in (str(what_runs.where(f)) for f in folders if f.startswith("/")):
        for path in [folder] if folder != "/" else [f"/{n}" for n in what_runs.loader_names()]:
            found[path] = "where the loader finds the server's libraries"
    preload = re.split(r"[: ]", env.get("LD_PRELOAD", ""))
    return found | {f: "a library loaded into the server (LD_PRELOAD)" for f in preload if f.startswith("/")}


def _cached(data: bytes) -> list[str]:
    """The folders of the libraries the loader's cache lists (each entry's value: a full path)."""
    at = data.find(LD_CACHE)
    if at < 0:
        return []
    count, entries = int.from_bytes(data[at + 20 : at + 24], "little"), at + 48
    found = set()
    for i in range(min(count, max(0, len(data) - entries) // 24)):
        value = at + int.from_bytes(data[entries + 24 * i + 8 : entries + 24 * i + 12], "little")
        path = data[value : data.find(b"\0", value)].decode(errors="replace")
        found.add(posixpath.dirname(path))
    return sorted(found)


def _conf(inside, path: str, depth: int) -> list[str]:
    """The folders an ld.so.conf names, with those of the files it includes (a glob, relative to
    its own folder)."""
    found = []
    for line in (read(inside, path) or b"").decode(errors="replace").splitlines():
        words = line.partition("#")[0].split()
        if words[:1] == ["include"]:
            for pattern in words[1:] if depth else []:
                at = what_runs.where(posixpath.join(posixpath.dirname(path), pattern))
                for name in names(inside, str(at.parent)):
                    if fnmatchcase(name, at.name):
                        found += _conf(inside, f"{at.parent}/{name}", depth - 1)
        elif words[:1] != ["hwcap"]:
            found += [w for w in re.split(r"[\s:,=]+", " ".join(words)) if w.startswith("/")]
    return found


def mounts_land(
    inside, mounts: dict[str, str], vllm_dir: str, b12x_dir: str, image: dict, cwd: str
) -> list[str]:
    """A mount target (mounts: by the field naming each) that lands, through the image's links, on
    the import or exec path (the profile's and the image's own paths), or that puts a
    standard-library name in the working directory: a spawned worker (python -c) imports
    multiprocessing and its helpers with the working directory first on sys.path."""
    problems = []
    cwd_path = what_runs.where(cwd)
    for name, target in mounts.items():
        landed = lands(inside, target)
        field = name if landed == str(what_runs.where(target)) else f"{name} (at {landed} in this image)"
        why = what_runs.refused_mount(field, landed, vllm_dir, b12x_dir, image)
        if why:
            problems.append(why)
        at = PurePosixPath(landed)
        stdlib_name = at.name.split(".")[0] in sys.stdlib_module_names
        if at in (cwd_path, *cwd_path.parents) or at.parent == cwd_path and stdlib_name:
            problems.append(
                f"{name} {target}: it puts {at.name} in the working directory {cwd_path}, where a "
                "spawned worker imports the standard library from first"
            )
    return problems


def from_cwd(search: str) -> list[str]:
    """A PATH entry execvp resolves from the working directory (empty or relative), which no check
    can see."""
    return [
        f"its PATH {search} holds {entry!r}, which execvp resolves from the working directory"
        for entry in search.split(":")
        if not entry.startswith("/")
    ]
