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

from seatkit import paths
from seatkit.models import lock as model_locks
from seatkit.seat import grammar, layout, overlay_lock
from seatkit.seat.profiles import Profile
from seatkit.serve import keys, nsys, pins


@dataclass(frozen=True)
class Ref:
    """A reference to a knob inside a word."""

    name: str


Word = tuple  # parts: str literals and Refs, joined into one argument
CONTAINER_KNOBS = ("SEAT_HOST", "SEAT_PORT")
PROFILE_LABEL = "seatkit.profile"  # every launch form marks its container with the profile


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
    hint: str = ""  # what to do when it fails, where the kind alone cannot say


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
    wraps: dict[str, list[Word]] = field(default_factory=dict)  # SEAT_NSYS mode -> words before the command
    grammar: dict[str, str] = field(default_factory=dict)  # knob -> the regex its value must match
    pass_env: list[str] = field(default_factory=list)  # from the launching shell, only when set

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

    def container_argv(self, values: dict[str, str]) -> list[str]:
        """What the container runs: unset the image's variables, the nsys wrap when on, the server."""
        nsys.check(self.grammar, values)
        wrap = self.wraps.get(values.get(nsys.MODE, nsys.OFF), [])
        return [
            "env",
            *[a for n in self.unset_env for a in ("-u", n)],
            *[resolve(w, values) for w in [*wrap, *self.command]],
        ]

    def passed_env(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        environ = os.environ if environ is None else environ
        return {n: environ[n] for n in self.pass_env if n in environ}

    def config_line(self, values: dict[str, str], environ: dict[str, str] | None = None) -> str:
        """The whole effective configuration on one line, as the launch prints it."""
        passed = self.passed_env(environ)
        knobs = [f"{k.name}={values[k.name]}" for k in self.knobs]
        knobs += [f"{n}={passed.get(n, '(unset)')}" for n in self.pass_env]
        return f"seat {self.profile.name}: {' '.join(knobs)} {self.facts}"

    @property
    def facts(self) -> str:
        p = self.profile
        spec = p.speculative
        parts = [
            f"runtime={p.runtime}",
            f"tp={p.gpus.tensor_parallel_size}",
            f"served_model_name={p.server.served_model_name}",
            f"speculative={spec.method}/k={spec.num_speculative_tokens}" if spec else "speculative=none",
            f"vllm_args={len(p.vllm_args)}",
            f"env={len(self.env)}",
        ]
        if p.docker:
            parts += [
                f"extra_mounts={','.join(m.target for m in p.docker.extra_mounts) or 'none'}",
                f"extra_env={','.join(p.docker.extra_env) or 'none'}",
            ]
        return " ".join(parts)


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
    inner = tuple(p if isinstance(p, Ref) else json.dumps(p)[1:-1] for p in model_paths[spec.draft_model])
    return (before, *inner, after)


def _native_home() -> Knob:
    return Knob(
        "SEAT_HOME",
        str(paths.seat_home()),
        "where the kit keeps runtimes and built models",
        shell_default="${XDG_CACHE_HOME:-$HOME/.cache}/seatkit",
    )


def build(profile: Profile) -> LaunchSpec:
    server = profile.server
    knobs = [
        Knob("SEAT_HOST", server.host, "address the server binds"),
        Knob("SEAT_PORT", str(server.port), "port the server listens on"),
    ]
    host, port = (Ref("SEAT_HOST"),), (Ref("SEAT_PORT"),)
    checks = [
        Check("reserved-port", port, "port", tuple(map(str, server.reserved_ports))),
        Check("port-free", host + (":",) + port, "port"),
    ]
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
            checks += _model_checks(key, model, where, locked.get(key), f"run: seat setup {profile.name}")
    else:
        docker = profile.docker
        image, digest = (
            (overlay_lock.seat_tag(profile, overlay_lock.load(), overlay_lock.load_b12x()), "")
            if profile.image.overlay
            else pins.base_reference(profile, allow_unpinned=True)
        )
        knobs = [
            Knob(
                "SEAT_IMAGE",
                image,
                "image the seat runs" + (" (`seat build` makes it)" if profile.image.overlay else ""),
            ),
            Knob("SEAT_CONTAINER", docker.container_name, "container name"),
            *knobs,
        ]
        checks = [
            Check("reserved-name", (Ref("SEAT_CONTAINER"),), "container name", tuple(server.reserved_names)),
            Check("container-free", (Ref("SEAT_CONTAINER"),), "container name"),
            Check("image", (Ref("SEAT_IMAGE"),), "image"),
            # An image by tag could be anything by now: warned of; refused, as `seat up` refuses
            # it, when it is a prebuilt image's own tag, unpinned when this was rendered.
            Check(
                "pinned",
                (Ref("SEAT_IMAGE"),),
                "image",
                (image,) if digest is None and profile.image.compare_overlay else (),
            ),
            *checks,
        ]
        for key, model in profile.models.items():
            knob = f"SEAT_MODEL_{key.upper()}_DIR"
            meaning = f"host directory of the {key} model"
            if model.build:  # built by a native profile's `seat setup`, in SEAT_HOME as it is there
                built = f"${{SEAT_HOME:-${{XDG_CACHE_HOME:-$HOME/.cache}}/seatkit}}/models/{model.build}"
                knobs.append(Knob(knob, str(layout.model(model.build)), meaning, shell_default=built))
                fetch = f"`seat setup` of a native profile that builds {model.build} makes it, or "
            else:
                knobs.append(Knob(knob, model.host_dir, meaning))
                fetch = f"seat model fetch {profile.name} downloads it, or " if model.repository else ""
            mounts.append(Mount((Ref(knob),), model.mount, read_only=True))
            model_paths[key] = (model.mount,)
            checks += _model_checks(
                key, model, (Ref(knob),), locked.get(key), f"{fetch}set {knob} to the folder that has it"
            )
        if docker.cache:
            knobs.append(
                Knob(
                    "SEAT_CACHE_DIR",
                    docker.cache.host_dir,
                    "persistent JIT cache (one per image and profile)",
                )
            )
            mounts.append(Mount((Ref("SEAT_CACHE_DIR"),), docker.cache.mount, read_only=False))
            checks.append(Check("cache", (Ref("SEAT_CACHE_DIR"),), "cache"))
            knobs += [Knob(*k) for k in nsys.knobs(profile.name, docker.cache.mount)]
        mounts += [Mount((m.source,), m.target, m.read_only) for m in docker.extra_mounts]
        # docker run -v would create a missing source as an empty root-owned folder; seat up would fail
        checks += [Check("exists", (m.source,), "extra mount source") for m in docker.extra_mounts]
        program = [("vllm",), ("serve",)]
    if profile.gpus.count:
        checks.append(Check("gpus", (), "GPUs", (str(profile.gpus.tensor_parallel_size),)))

    command = [
        *program,
        model_paths[profile.model],
        ("--host",),
        host,
        ("--port",),
        port,
        ("--served-model-name",),
        (server.served_model_name,),
    ]
    if profile.gpus.tensor_parallel_size > 1:
        command += [("--tensor-parallel-size",), (str(profile.gpus.tensor_parallel_size),)]
    spec_json = speculative_config(profile, model_paths)
    if spec_json:
        command += [("--speculative-config",), spec_json]
    command += [(arg,) for arg in vllm_flags(profile)]

    env = {**profile.env, **(profile.docker.extra_env if profile.docker else {})}
    api_key_file = None
    if server.api_key:
        knobs.append(
            Knob(
                "SEAT_API_KEY_FILE",
                str(keys.key_file(profile.name)),
                "file holding the API key (mode 0600; `seat up` makes it)",
                shell_default=keys.shell_key_file(profile.name),
            )
        )
        api_key_file = (Ref("SEAT_API_KEY_FILE"),)
        checks.append(Check("api-key", api_key_file, "API key file"))
    return LaunchSpec(
        profile=profile,
        knobs=knobs,
        env=env,
        command=command,
        checks=checks,
        mounts=mounts,
        unset_env=list(profile.docker.unset_env if profile.docker else []),
        api_key_file=api_key_file,
        venv=venv if profile.native else None,
        **_profiling(profile),
    )


def _profiling(profile: Profile) -> dict:
    """The nsys wraps and knob grammar (docker seats with a cache volume), and the pass-through env."""
    docker = profile.docker
    if docker is None:
        return {}
    out: dict = {"pass_env": list(docker.pass_env)}
    if docker.cache:
        out.update(wraps=nsys.wraps(), grammar=nsys.grammar(docker.cache.mount))
    return out


def _model_checks(key: str, model, where: Word, lock, missing: str) -> list[Check]:
    label = f"{key} model"
    checks = [Check("dir", where, label, hint=missing)]
    checks += [Check("file", where + (f"/{name}",), f"{label} {name}") for name in model.files]
    if model.shards_from_index:
        checks.append(Check("shards", where, label))
    if lock:  # every file's size against the models lock: a directory walk, so always on
        checks.append(Check("sizes", where, label, tuple((f.path, f.size) for f in lock.files)))
    return checks
