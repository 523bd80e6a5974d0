"""What a verified profile may set (what_runs.yaml), and the mark of a seat that is not verified.

An allowlist: the environment names, server flags, speculative keys and mount targets the shipped
profiles need. A profile that sets anything else is an experiment: it is not refused, and every
result of its seat carries the mark, naming exactly what is off the list.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path, PurePosixPath

from seatkit import safe_yaml
from seatkit.seat import vllm_flags

MARK = "UNVERIFIED"


@cache
def _data() -> dict:
    return safe_yaml.read(Path(__file__).with_suffix(".yaml"), "what_runs data")


def _flag_off(flag: str, value) -> bool:
    """Whether a vllm_args flag, read as vLLM reads it, is off the list: an unlisted name (an
    abbreviation and a short alias among them), a value or a config key the list does not name."""
    data = _data()["vllm_args"]
    read = vllm_flags.read(flag)
    given = read.carried if read.carried is not None else value
    if read.name in data["keys"]:
        keys = [read.key] if read.key else _config_keys(given)
        return keys is None or not set(keys) <= set(data["keys"][read.name])
    if read.key:
        return True
    if read.name in data["values"]:
        return str(given) not in data["values"][read.name]
    return read.name not in data["flags"]


def _config_keys(value) -> list[str] | None:
    """The keys of a JSON config flag's value (a mapping, or JSON text), None when it is neither."""
    try:
        config = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return None
    return [str(k).replace("-", "_") for k in config] if isinstance(config, dict) else None


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


def _plain(text: str) -> str:
    """A name as the mark shows it: as it is when plain, else quoted with its escapes (one line,
    in every place the mark is printed or written)."""
    return text if re.fullmatch(r"[\w./+-]+", text, re.ASCII) else json.dumps(text)


def off_list(profile) -> list[str]:
    """Each field of the profile that sets what no verified profile may, as `field.name`."""
    data = _data()
    env = {f"env.{n}": n for n in profile.env}
    if profile.docker:
        for field in ("extra_env", "pass_env", "unset_env"):
            env |= {f"docker.{field}.{n}": n for n in getattr(profile.docker, field)}
    found = [field for field, name in env.items() if name not in data["env"]]
    found += [f"vllm_args.{f}" for f, v in profile.vllm_args.items() if _flag_off(f, v)]
    config = profile.speculative.config if profile.speculative else {}
    allowed = data["speculative_keys"]
    found += [f"speculative.config.{_plain(k)}" for k in config if k.replace("-", "_") not in allowed]
    found += [
        f"{field} {_plain(target)}"
        for field, target in mounts(profile).items()
        if target not in data["mounts"]
    ]
    files = {f"models.{key}.files": model.files for key, model in profile.models.items()}
    return found + refused_weightless(profile.vllm_args, files)


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
        and vllm_flags.read(flag).name == "load-format"
        and (vllm_flags.read(flag).carried or value) == data["weightless"]
    ]


def shell_kept() -> str:
    """A bash `case` pattern of the shell's names a native seat's server keeps (from_shell's)."""
    return "|".join(_data()["shell_kept"])


def from_shell(name: str) -> bool:
    """Whether a native seat's server takes a name's value from the launching shell."""
    return any(fnmatchcase(name, kept) for kept in _data()["shell_kept"])


def shell_unset() -> str:
    """What a rendered script unsets on its first line: what bash reads from the environment
    that its privileged mode does not ignore."""
    return " ".join(_data()["shell"])


def differs(profile) -> list[str]:
    """How the profile differs from what a verified one may set: its experiment's reason, and what
    it sets off the list."""
    off = off_list(profile)
    found = [profile.experiment.reason if profile.experiment else None]
    return [why for why in [*found, f"off the allowlist: {', '.join(off)}" if off else None] if why]


def mark(record) -> str | None:
    """Why a result is not verified, from its provenance record (seatkit.serve.provenance) or the
    conditions that carry it: each way what ran differs from its records; None: it does not. The
    one place the mark's reason comes from, for every printer of a figure."""
    record = record.get("provenance", record) if isinstance(record, dict) else None
    found = record.get("differs") if isinstance(record, dict) else None
    return "; ".join(str(why) for why in found) if found else None


def marked(text: str, why: str | None, short: bool = False) -> str:
    """text, marked when why (mark's reason) says the seat was not verified: every place a number of
    such a seat goes (summary, report, compare, fleet, doctor, campaign) shows it through here.
    short: the mark alone, for a table cell (the reason is printed above the table)."""
    return text if not why else f"{text} {MARK}" if short else f"{text} {MARK} ({why})"
