"""Environment names and mount targets that change what a seat executes or imports (what_runs.yaml).

A profile that sets one of them could run other code than the verified overlay while every check
of the overlay still passes, so the profile refuses them, naming the field, unless it declares
itself an experiment (and its results are marked UNVERIFIED).
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path, PurePosixPath
from posixpath import normpath

from seatkit import safe_yaml
from seatkit.seat import vllm_flags


@cache
def _data() -> dict:
    return safe_yaml.read(Path(__file__).with_suffix(".yaml"), "what_runs data")


def env_reason(name: str) -> str | None:
    """Why an environment name changes what runs, or None when it does not."""
    env = _data()["env"]
    if name in env["names"]:
        return env["names"][name]
    return next((why for prefix, why in env["prefixes"].items() if name.startswith(prefix)), None)


def refused_env(field: str, names) -> list[str]:
    """One line per name of `field` that changes what runs."""
    return [f"{field}.{n}: it sets {env_reason(n)}" for n in names if env_reason(n)]


def takes_path(name: str) -> bool:
    """Whether a name's value is a path: a cache's, or a name with a path ending (not a setting)."""
    env = _data()["env"]
    ends = name.endswith(tuple(env["path_endings"])) and name not in env["settings"]
    return ends or name in env["caches"]


def names_path(name: str, value: str) -> bool:
    """Whether a value names a file or folder: with a / anywhere, ., .., ~ (HOME, expanded), or
    any value of a name that takes a path. A relative one is resolved against the server's working
    directory as an absolute one is against /."""
    return "/" in value or value in (".", "..") or value.startswith("~") or takes_path(name)


def refused_values(field: str, env: dict[str, str]) -> list[str]:
    """One line per name of `field` whose value names a file or folder, unless it is one of the
    caches (judged by refused_caches) or refused by name already."""
    caches = _data()["env"]["caches"]
    return [
        f"{field}.{n}: its value names a file or folder, from which code could be loaded (a "
        "verified profile points only the cache names at paths, into the kit's cache mount; a "
        "relative one is resolved against the server's working directory)"
        for n, value in env.items()
        if names_path(n, value) and n not in caches and not env_reason(n)
    ]


def refused_unseen(field: str, names) -> list[str]:
    """One line per name whose value the profile cannot see (pass_env) that takes a path."""
    caches = _data()["env"]["caches"]
    return [
        f"{field}.{n}: it takes a path, and its value is the launching shell's, unseen by the kit"
        for n in names
        if takes_path(n) and n not in caches and not env_reason(n)
    ]


def _kept() -> list[str]:
    """What a native seat's server takes from the shell though its name says path."""
    env = _data()["env"]
    return ["SEAT_*", "PATH", *env["native_defaults"], *env["settings"]]


def from_shell(name: str) -> bool:
    """Whether a native seat's server takes a name's value from the launching shell, as a
    container takes none: PATH and the user's own folders (native_defaults), the kit's own knobs
    (SEAT_*), and any other name that neither changes what runs nor takes a path."""
    if any(fnmatchcase(name, kept) for kept in _kept()):
        return True
    return not env_reason(name) and not takes_path(name)


NATIVE_CACHES = "a native seat's are the server's defaults, under the launching user's folders"


def refused_caches(field: str, env, cache_mount: str | None, native: bool = False) -> list[str]:
    """One line per name of `field` that puts a folder of compiled code the server runs outside the
    kit's cache mount (env: names, or names and their values); a native seat has no mount, so every
    one moves it from the defaults (native_defaults, kept from the launching shell)."""
    caches = _data()["env"]["caches"]
    values = env if isinstance(env, dict) else dict.fromkeys(env)
    mount = where(cache_mount) if cache_mount else None
    at = NATIVE_CACHES if native else cache_mount or "none"
    return [
        f"{field}.{n}: it moves {caches[n]} out of the kit's cache mount ({at})"
        for n, value in values.items()
        # A relative value is the server's working directory's, never judged as if from /.
        if n in caches
        and not (mount and value and value.startswith("/") and mount in (where(value), *where(value).parents))
    ]


def shell_patterns() -> tuple[str, str]:
    """from_shell as two bash `case` patterns, tried in turn: what a native seat's script keeps,
    and what it unsets from the shell it is run in, as `seat up` leaves it out
    (seatkit.serve.backends.native.inherited)."""
    env = _data()["env"]
    refused = [
        *[n for n in [*env["names"], *env["caches"]] if not from_shell(n)],
        *[f"{p}*" for p in env["prefixes"]],
        *[f"*{e}" for e in env["path_endings"]],
    ]
    return "|".join(_kept()), "|".join(refused)


def shell_unset() -> str:
    """What a rendered script unsets on its first line: what bash reads from the environment
    that its privileged mode does not ignore."""
    return " ".join(_data()["shell"])


def owned_args(vllm_args: dict) -> list[str]:
    """One line per vllm_args flag that sets again what a field of the profile sets (argparse keeps
    the last, so it would replace the field's value), read as vLLM reads it: `host=0.0.0.0`,
    `hos`, `speculative-config.model` (gathered into a second --speculative-config) all count;
    and one whose value vLLM would read as a flag of its own."""
    owned = _data()["vllm_args"]["owned"]
    found = []
    for flag, value in vllm_args.items():
        hit = vllm_flags.resolved(vllm_flags.read(flag).name, owned)
        if hit:
            found.append(f"vllm_args.{flag} is --{hit}, which {owned[hit]} sets")
        if vllm_flags.flag_like(value):
            found.append(
                f"vllm_args.{flag}: its value {value!r} reads as a flag of its own (a flag whose "
                "value is optional, as --hf-token, takes none and leaves it to vLLM as one)"
            )
    return found


def refused_args(vllm_args: dict) -> list[str]:
    """One line per vllm_args flag that imports or runs code the profile names, read as vLLM
    reads it (seatkit.seat.vllm_flags): underscores, name=value, a dotted key, an abbreviation."""
    data = _data()["vllm_args"]
    found = []
    for flag, value in vllm_args.items():
        read = vllm_flags.read(flag)
        if value is False:  # --no-trust-remote-code loads nothing
            continue
        hit = vllm_flags.resolved(read.name, data["flags"], data["own_names"])
        if hit:
            said = "" if flag.partition("=")[0] == hit else f" (vLLM reads it as --{hit})"
            found.append(f"vllm_args.{flag}: it loads {data['flags'][hit]}{said}")
        named = vllm_flags.resolved(read.name, data["named_values"], data["own_names"])
        given = read.carried if read.carried is not None else value
        if named and given not in data["named_values"][named]["values"]:
            rule = data["named_values"][named]
            found.append(
                f"vllm_args.{flag}: a value other than {', '.join(rule['values'])} is {rule['other']}"
            )
        config = vllm_flags.resolved(read.name, data["config_keys"], data["own_names"])
        rules: dict[str, str] = data["config_keys"][config] if config else {}
        found += [
            f"vllm_args.{flag}: its {k} loads {rules[k]}" for k in _config_keys(read, value) if k in rules
        ]
    return found


def refused_speculative(config: dict) -> list[str]:
    """One line per key of the speculative section's config (the --speculative-config the kit
    writes) that names other weights or code for the draft (vLLM reads its dashes as _)."""
    rules = _data()["vllm_args"]["config_keys"]["speculative-config"]
    return [
        f"speculative.config.{k}: it loads {rules[k.replace('-', '_')]}"
        for k in config
        if k.replace("-", "_") in rules
    ]


def refused_weightless(vllm_args: dict, files: dict[str, list[str]]) -> list[str]:
    """A load-format that reads no weights (random ones) for a seat whose files (by where they are
    named: a profile's models.KEY.files, a models lock's) hold a weight file: its numbers would be
    of weights nobody locked."""
    data = _data()["vllm_args"]
    weights = [
        f"{where}: {name}"
        for where, names in files.items()
        for name in names
        if any(fnmatchcase(PurePosixPath(name).name, pattern) for pattern in data["weight_files"])
    ]
    return [
        f"vllm_args.{flag}: {value} loads random weights in place of the locked ones ({weights[0]})"
        for flag, value in vllm_args.items()
        if weights
        and vllm_flags.resolved(vllm_flags.read(flag).name, data["named_values"], data["own_names"])
        == "load-format"
        and (vllm_flags.read(flag).carried or value) == data["weightless"]
    ]


def _config_keys(read: vllm_flags.Flag, value) -> list[str]:
    """The keys a JSON config flag sets: a dotted flag's (compilation-config.backend), else those of
    its value, a mapping or JSON text (name=value carries it in the flag)."""
    if read.key:
        return [read.key]
    text = read.carried if read.carried is not None else value
    try:
        config = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return []  # vLLM refuses it too
    return [str(k).replace("-", "_") for k in config] if isinstance(config, dict) else []


def short_flags() -> dict[str, str]:
    """vLLM's short aliases of its long flags (-cc is compilation-config), by the alias."""
    return dict(_data()["vllm_args"]["short"])


def where(target: str) -> PurePosixPath:
    """Where docker mounts a target: '..' and '//' resolved lexically, as it resolves them."""
    return PurePosixPath("/" + normpath(target).lstrip("/"))


def _overlap(target: str, pattern: str) -> bool:
    """On, inside or above: every part of the shorter path is the other's, or matches it."""
    a, b = where(target).parts, PurePosixPath(pattern).parts
    return all(x == y or fnmatchcase(x, y) for x, y in zip(a, b, strict=False))  # the shorter's parts


def under(folders: dict[str, str] | None = None) -> dict[str, str]:
    """The paths of the data's `under` in the folders an environment name holds (folders: by the
    name, e.g. the container's HOME), at the data's defaults where one is not given."""
    folders = folders or {}
    return {
        str(where(f"{folders.get(name) or spec['default']}/{path}")): why
        for name, spec in _data()["mounts"]["under"].items()
        for path, why in spec["names"].items()
    }


def cache_folders(env: dict[str, str]) -> dict[str, str]:
    """Where an environment (a container's, HOME filled in) keeps the compiled code the server
    loads: `under`'s paths in its HOME and TMPDIR, and the folder each other cache name holds."""
    caches, held = _data()["env"]["caches"], _data()["mounts"]["under"]
    own = {
        str(where(env[n])): f"{why}, its {n}"
        for n, why in caches.items()
        if n not in held and env.get(n, "").startswith("/")
    }
    return under({n: env[n] for n in held if env.get(n)}) | own


def loader_names() -> list[str]:
    """What the loader looks up in a folder of its search path (by the data), for a folder of / ."""
    return _data()["mounts"]["loader_names"]


def openssl() -> dict:
    """Where OpenSSL's config is read from, by the data: configs, prefix (under an interpreter's
    prefix) and env (the names that move it or its engines and providers)."""
    return _data()["mounts"]["openssl"]


def protected(vllm_dir: str, b12x_dir: str) -> dict[str, str]:
    """The paths no mount may touch: the data's (with root's HOME and /tmp), and the profile's own
    package, its site-packages (with its .pth files) and the venv around it (with its bin)."""
    out = dict(_data()["mounts"]["paths"]) | under()
    packages = PurePosixPath(vllm_dir).parent
    out[vllm_dir] = "the vllm package (image.vllm_dir)"
    out[b12x_dir] = "the b12x package (image.b12x_dir)"
    out[str(packages)] = "site-packages, its .pth files run at every start"
    if "lib" in packages.parts:  # <venv>/lib/pythonX.Y/site-packages: the venv, with its bin
        venv = PurePosixPath(*packages.parts[: packages.parts.index("lib")])
        if str(venv) != "/":
            out[str(venv)] = "the venv, whose bin holds vllm and python"
    return out


def refused_mount(
    field: str, target: str, vllm_dir: str, b12x_dir: str, image: dict[str, str] | None = None
) -> str | None:
    """Why a mount target of `field` changes what runs, or None; image: what the outside check
    read of the image besides (seatkit.image.what_mounts), judged first."""
    for path, why in ((image or {}) | protected(vllm_dir, b12x_dir)).items():
        if _overlap(target, path):
            return f"{field} {target}: it mounts over {path} ({why})"
    return None


MARK = "UNVERIFIED"


def mounts(profile) -> dict[str, str]:
    """Every container path the profile's seat mounts over, by the field that names it."""
    out = {f"models.{k}.mount": m.mount for k, m in profile.models.items() if m.mount}
    if profile.docker:
        out |= {
            f"docker.extra_mounts[{i}].target": m.target for i, m in enumerate(profile.docker.extra_mounts)
        }
        if profile.docker.cache:
            out["docker.cache.mount"] = profile.docker.cache.mount
    return out


def conditions(profile, *found: str | None) -> dict:
    """What a result of the profile's seat carries: {"unverified": reason} for an experiment, or
    for a seat whose image or weights nothing vouches for (found: why, as `seat up` found it), else {}."""
    reasons = [profile.experiment.reason if profile.experiment else None, *found]
    return {"unverified": "; ".join(r for r in reasons if r)} if any(reasons) else {}


def marked(text: str, conditions: dict, short: bool = False) -> str:
    """text, marked where a result's conditions say the seat was an experiment: every place a
    number of such a seat goes (summary, report, compare, fleet, doctor) shows it through here.
    short: the mark alone, for a table cell (the reason is printed above the table)."""
    why = conditions.get("unverified") if isinstance(conditions, dict) else None
    return text if not why else f"{text} {MARK}" if short else f"{text} {MARK} ({why})"
