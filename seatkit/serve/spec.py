"""A profile turned into one launch description that every consumer shares.

The bash renderer, the compose renderer and `seat up` (docker SDK or a subprocess) all read the same
LaunchSpec, so the script an operator runs by hand and the seat the kit starts cannot drift apart.
Host-specific values (paths, port, image) are knobs: the script reads them from the environment with
the profile's value as default, and `seat up` does the same.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from seatkit import overlay_lock, paths
from seatkit.models import lock as model_locks
from seatkit.serve import grammar, keys, pins
from seatkit.serve.profile import Profile


@dataclass(frozen=True)
class Ref:
    """A reference to a knob inside a word."""

    name: str


Word = tuple  # parts: str literals and Refs, joined into one argument
CONTAINER_KNOBS = ("SEAT_HOST", "SEAT_PORT")


@dataclass(frozen=True)
class Knob:
    name: str
    default: str
    meaning: str
    shell_default: str | None = None  # a bash expression, for defaults that depend on the machine


@dataclass(frozen=True)
class Check:
    """One preflight check; `kind` picks the implementation (bash template and Python)."""

    kind: str
    subject: Word = ()
    label: str = ""
    values: tuple = ()


@dataclass(frozen=True)
class Mount:
    source: Word
    target: str
    read_only: bool


@dataclass
class LaunchSpec:
    profile: Profile
    knobs: list[Knob]
    env: dict[str, str]
    command: list[Word]  # the server's argv: `vllm serve MODEL --flag value ...`
    checks: list[Check]
    mounts: list[Mount] = field(default_factory=list)
    unset_env: list[str] = field(default_factory=list)
    api_key_file: Word | None = None
    venv: Word | None = None  # native runtime only

    @property
    def native(self) -> bool:
        return self.profile.runtime == "native"

    def container_knobs(self, values: dict[str, str]) -> dict[str, str]:
        """Knobs the container reads at run time (its healthcheck probes SEAT_HOST:SEAT_PORT)."""
        return {name: values[name] for name in CONTAINER_KNOBS}

    def values(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """Each knob's value: the environment's when set, else the profile's; checked."""
        environ = os.environ if environ is None else environ
        values = {k.name: environ.get(k.name, k.default) for k in self.knobs}
        for name in sorted(values.keys() & grammar.KNOBS.keys()):
            grammar.check_knob(name, values[name])
        return values


def resolve(word: Word, values: dict[str, str]) -> str:
    return "".join(values[p.name] if isinstance(p, Ref) else p for p in word)


def flag_value(value) -> str:
    """How a profile value is written on the vLLM command line."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def vllm_flags(profile: Profile) -> list[str]:
    """`--flag value` pairs from vllm_args: true is a bare flag, false its --no- form."""
    out = []
    for flag, value in profile.vllm_args.items():
        if value is True:
            out.append(f"--{flag}")
        elif value is False:
            out.append(f"--no-{flag}")
        else:
            out += [f"--{flag}", flag_value(value)]
    return out


_HOLE = "@draft-model@"


def speculative_config(profile: Profile, model_paths: dict[str, Word]) -> Word | None:
    """The --speculative-config JSON; the draft path may hold a knob, so it is spliced in."""
    spec = profile.speculative
    if spec is None:
        return None
    data = {"method": spec.method, "num_speculative_tokens": spec.num_speculative_tokens}
    if spec.draft_model is not None:
        data["model"] = _HOLE
    text = flag_value({**data, **spec.config})
    if spec.draft_model is None:
        return (text,)
    before, after = text.split(_HOLE)
    inner = tuple(p if isinstance(p, Ref) else json.dumps(p)[1:-1]
                  for p in model_paths[spec.draft_model])
    return (before, *inner, after)


def _native_home() -> Knob:
    return Knob("SEAT_HOME", str(paths.seat_home()), "where the kit keeps runtimes and built models",
                shell_default='${XDG_CACHE_HOME:-$HOME/.cache}/seatkit')


def build(profile: Profile) -> LaunchSpec:
    server = profile.server
    knobs = [Knob("SEAT_HOST", server.host, "address the server binds"),
             Knob("SEAT_PORT", str(server.port), "port the server listens on")]
    host, port = (Ref("SEAT_HOST"),), (Ref("SEAT_PORT"),)
    checks = [Check("reserved-port", port, "port", tuple(map(str, server.reserved_ports))),
              Check("port-free", host + (":",) + port, "port")]
    mounts: list[Mount] = []
    venv = None
    model_paths: dict[str, Word] = {}
    locked = model_locks.read(profile) or {}

    if profile.runtime == "native":
        knobs.insert(0, _native_home())
        home = (Ref("SEAT_HOME"),)
        venv = home + (f"/venvs/{profile.native.venv}",)
        program = [venv + ("/bin/vllm",), ("serve",)]
        checks.insert(0, Check("venv", venv, f"runtime venv {profile.native.venv}"))
        for key, model in profile.models.items():
            where = home + (f"/models/{model.build}",) if model.build else (model.host_dir,)
            model_paths[key] = where
            checks += _model_checks(key, model, where, locked.get(key))
    else:
        docker = profile.docker
        image = (overlay_lock.seat_tag(profile, overlay_lock.load()) if profile.image.overlay
                 else pins.base_reference(profile, allow_unpinned=True)[0])
        knobs = [Knob("SEAT_IMAGE", image, "image the seat runs"
                      + (" (`seat build` makes it)" if profile.image.overlay else "")),
                 Knob("SEAT_CONTAINER", docker.container_name, "container name"),
                 *knobs]
        checks = [Check("reserved-name", (Ref("SEAT_CONTAINER"),), "container name",
                        tuple(server.reserved_names)),
                  Check("container-free", (Ref("SEAT_CONTAINER"),), "container name"),
                  Check("image", (Ref("SEAT_IMAGE"),), "image"),
                  *checks]
        for key, model in profile.models.items():
            knob = f"SEAT_MODEL_{key.upper()}_DIR"
            knobs.append(Knob(knob, model.host_dir, f"host directory of the {key} model"))
            mounts.append(Mount((Ref(knob),), model.mount, read_only=True))
            model_paths[key] = (model.mount,)
            checks += _model_checks(key, model, (Ref(knob),), locked.get(key))
        if docker.cache:
            knobs.append(Knob("SEAT_CACHE_DIR", docker.cache.host_dir,
                              "persistent JIT cache (one per image and profile)"))
            mounts.append(Mount((Ref("SEAT_CACHE_DIR"),), docker.cache.mount, read_only=False))
        program = [("vllm",), ("serve",)]
    if profile.gpus.count:
        checks.append(Check("gpus", (), "GPUs", (str(profile.gpus.tensor_parallel_size),)))

    command = [*program, model_paths[profile.model],
               ("--host",), host, ("--port",), port,
               ("--served-model-name",), (server.served_model_name,)]
    if profile.gpus.tensor_parallel_size > 1:
        command += [("--tensor-parallel-size",), (str(profile.gpus.tensor_parallel_size),)]
    spec_json = speculative_config(profile, model_paths)
    if spec_json:
        command += [("--speculative-config",), spec_json]
    command += [(arg,) for arg in vllm_flags(profile)]

    env = dict(profile.env)
    api_key_file = None
    if server.api_key:
        knobs.append(Knob("SEAT_API_KEY_FILE", str(keys.key_file(profile.name)),
                          "file holding the API key (mode 0600; `seat up` makes it)",
                          shell_default=keys.shell_key_file(profile.name)))
        api_key_file = (Ref("SEAT_API_KEY_FILE"),)
        checks.append(Check("api-key", api_key_file, "API key file"))
    return LaunchSpec(profile=profile, knobs=knobs, env=env, command=command, checks=checks,
                      mounts=mounts, unset_env=list(profile.docker.unset_env if profile.docker else []),
                      api_key_file=api_key_file, venv=venv if profile.native else None)


def _model_checks(key: str, model, where: Word, lock=None) -> list[Check]:
    label = f"{key} model"
    checks = [Check("dir", where, label)]
    checks += [Check("file", where + (f"/{name}",), f"{label} {name}") for name in model.files]
    if model.shards_from_index:
        checks.append(Check("shards", where, label))
    if lock:  # every file's size against the models lock: a directory walk, so always on
        checks.append(Check("sizes", where, label, tuple((f.path, f.size) for f in lock.files)))
    return checks
