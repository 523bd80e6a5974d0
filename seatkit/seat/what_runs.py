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


def refused_caches(field: str, env, cache_mount: str | None) -> list[str]:
    """One line per name of `field` that puts a folder of compiled code the server runs outside the
    kit's cache mount (env: names, or names and their values)."""
    caches = _data()["env"]["caches"]
    values = env if isinstance(env, dict) else dict.fromkeys(env)
    mount = where(cache_mount) if cache_mount else None
    return [
        f"{field}.{n}: it moves {caches[n]} out of the kit's cache mount ({cache_mount or 'none'})"
        for n, value in values.items()
        if n in caches and not (mount and value and mount in (where(value), *where(value).parents))
    ]


def shell_pattern() -> str:
    """The names, PATH apart, as one bash `case` pattern: what a native seat's script unsets from
    the shell it is run in, as `seat up` leaves them out (seatkit.serve.backends.native.inherited)."""
    env = _data()["env"]
    return "|".join([n for n in env["names"] if n != "PATH"] + [f"{p}*" for p in env["prefixes"]])


def refused_args(vllm_args: dict) -> list[str]:
    """One line per vllm_args flag that imports or runs code the profile names. A flag may carry
    its value (name=value) and argparse takes an unambiguous abbreviation, so both are judged."""
    data = _data()["vllm_args"]
    found = []
    for flag, value in vllm_args.items():
        name = flag.split("=")[0].split(".")[0]
        if value is False or name in data["own_names"]:  # --no-trust-remote-code loads nothing
            continue
        hit = next((f for f in data["flags"] if f.startswith(name)), None)
        if hit:
            found.append(f"vllm_args.{flag}: it loads {data['flags'][hit]}")
        rules: dict[str, str] = next(
            (keys for f, keys in data["config_keys"].items() if f.startswith(name)), {}
        )
        found += [
            f"vllm_args.{flag}: its {k} loads {rules[k]}" for k in _config_keys(flag, value) if k in rules
        ]
    return found


def _config_keys(flag: str, value) -> list[str]:
    """The keys a JSON config flag sets: a dotted flag's (compilation-config.backend), else those of
    its value, a mapping or JSON text (name=value carries it in the flag)."""
    key = flag.split("=")[0].partition(".")[2]
    if key:
        return [key.split(".")[0].replace("-", "_")]
    text = flag.partition("=")[2] or value
    try:
        config = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return []  # vLLM refuses it too
    return [str(k).replace("-", "_") for k in config] if isinstance(config, dict) else []


def where(target: str) -> PurePosixPath:
    """Where docker mounts a target: '..' and '//' resolved lexically, as it resolves them."""
    return PurePosixPath("/" + normpath(target).lstrip("/"))


def _overlap(target: str, pattern: str) -> bool:
    """On, inside or above: every part of the shorter path matches the other's."""
    a, b = where(target).parts, PurePosixPath(pattern).parts
    return all(fnmatchcase(x, y) for x, y in zip(a, b, strict=False))  # the shorter's parts


def protected(vllm_dir: str, b12x_dir: str) -> dict[str, str]:
    """The paths no mount may touch: the data's, and the profile's own package, its site-packages
    (with its .pth files) and the venv around it (with its bin)."""
    out = dict(_data()["mounts"]["paths"])
    packages = PurePosixPath(vllm_dir).parent
    out[vllm_dir] = "the vllm package (image.vllm_dir)"
    out[b12x_dir] = "the b12x package (image.b12x_dir)"
    out[str(packages)] = "site-packages, its .pth files run at every start"
    if "lib" in packages.parts:  # <venv>/lib/pythonX.Y/site-packages: the venv, with its bin
        venv = PurePosixPath(*packages.parts[: packages.parts.index("lib")])
        if str(venv) != "/":
            out[str(venv)] = "the venv, whose bin holds vllm and python"
    return out


def refused_mount(field: str, target: str, vllm_dir: str, b12x_dir: str) -> str | None:
    """Why a mount target of `field` changes what runs, or None."""
    for path, why in protected(vllm_dir, b12x_dir).items():
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


def conditions(profile) -> dict:
    """What a result of the profile's seat carries: {"unverified": reason} for an experiment."""
    return {"unverified": profile.experiment.reason} if profile.experiment else {}


def marked(text: str, conditions: dict, short: bool = False) -> str:
    """text, marked where a result's conditions say the seat was an experiment: every place a
    number of such a seat goes (summary, report, compare, fleet, doctor) shows it through here.
    short: the mark alone, for a table cell (the reason is printed above the table)."""
    why = conditions.get("unverified") if isinstance(conditions, dict) else None
    return text if not why else f"{text} {MARK}" if short else f"{text} {MARK} ({why})"
