"""A profile turned into one launch description that every consumer shares.

The bash renderer, the compose renderer and `seat up` (docker SDK or a subprocess) all read the same
LaunchSpec, so the script an operator runs by hand and the seat the kit starts cannot drift apart.
Host-specific values (paths, port, image) are knobs: the script reads them from the environment with
the profile's value as default, and `seat up` does the same.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from seatkit import paths
from seatkit.models import lock
from seatkit.seat import grammar, layout, overlay_lock
from seatkit.seat.profiles import DockerProfile, NativeProfile, Profile
from seatkit.serve import keys, nsys, pins
from seatkit.serve.checks import Check, Kind
from seatkit.serve.words import Knob, Ref, Word

CONTAINER_KNOBS = ("SEAT_HOST", "SEAT_PORT")
PROFILE_LABEL = "seatkit.profile"  # every launch form marks its container with the profile
# The host knobs' grammars in words (the patterns are seatkit.seat.grammar's).
HOST_WHAT = "an IP address or a host name"
PORT_WHAT = "a port number from 1 to 65535"
IMAGE_WHAT = "an image reference (name[:tag][@sha256:digest])"
CONTAINER_WHAT = "a container name (letters, digits, _ . -)"


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
    pass_env: list[str] = field(default_factory=list)  # from the launching shell, only when set

    @property
    def native(self) -> bool:
        return isinstance(self.profile, NativeProfile)

    def values(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Each knob's value: the environment's when set, else the profile's (its grammar is
        checked where it is launched: the script, and `seat up` through it, preflight.run)."""
        env = os.environ if environ is None else environ
        return {k.name: env.get(k.name, k.default) for k in self.knobs}

    def passed_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        env = os.environ if environ is None else environ
        return {n: env[n] for n in self.pass_env if n in env}

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


@dataclass
class _Runtime:
    """What the runtime makes of the profile: knobs and checks in launch order, and where things are."""

    knobs: list[Knob]
    checks: list[Check]
    program: list[Word]
    model_paths: dict[str, Word]
    mounts: list[Mount] = field(default_factory=list)
    venv: Word | None = None


def _native_home() -> Knob:
    return Knob(
        "SEAT_HOME",
        str(paths.seat_home()),
        "where the kit keeps runtimes and built models",
        shell_default="${XDG_CACHE_HOME:-$HOME/.cache}/seatkit",
    )


def _native(profile: NativeProfile, locked: dict, knobs: list[Knob], checks: list[Check]) -> _Runtime:
    home = (Ref("SEAT_HOME"),)
    venv = home + (f"/venvs/{profile.native.venv}",)
    checks = [Check(Kind.VENV, venv, f"runtime venv {profile.native.venv}"), *checks]
    model_paths: dict[str, Word] = {}
    for key, model in profile.models.items():
        where = home + (f"/models/{model.build}",) if model.build else (model.host_dir,)
        model_paths[key] = where
        checks += _model_checks(key, model, where, locked.get(key), f"run: seat setup {profile.name}")
    program = [venv + ("/bin/vllm",), ("serve",)]
    return _Runtime([_native_home(), *knobs], checks, program, model_paths, venv=venv)


def _image(profile: DockerProfile) -> tuple[str, str | None]:
    """The image the seat runs by default, and its digest (None: a tag alone)."""
    if profile.image.overlay:
        return overlay_lock.seat_tag(profile, overlay_lock.load(), overlay_lock.load_b12x()), ""
    return pins.base_reference(profile, allow_unpinned=True)


def _docker(profile: DockerProfile, locked: dict, knobs: list[Knob], checks: list[Check]) -> _Runtime:
    docker = profile.docker
    image, digest = _image(profile)
    made = " (`seat build` makes it)" if profile.image.overlay else ""
    knobs = [
        Knob("SEAT_IMAGE", image, "image the seat runs" + made, pattern=grammar.IMAGE, what=IMAGE_WHAT),
        Knob(
            "SEAT_CONTAINER",
            docker.container_name,
            "container name",
            pattern=grammar.CONTAINER_NAME,
            what=CONTAINER_WHAT,
        ),
        *knobs,
    ]
    name, image_ref = (Ref("SEAT_CONTAINER"),), (Ref("SEAT_IMAGE"),)
    # An image by tag could be anything by now: warned of; refused, as `seat up` refuses it, when it
    # is a prebuilt image's own tag, unpinned when this was rendered.
    unpinned = (image,) if digest is None and profile.image.compare_overlay else ()
    checks = [
        Check(Kind.RESERVED_NAME, name, "container name", tuple(profile.server.reserved_names)),
        Check(Kind.CONTAINER_FREE, name, "container name"),
        Check(Kind.IMAGE, image_ref, "image"),
        Check(Kind.PINNED, image_ref, "image", unpinned),
        *checks,
    ]
    mounts, model_paths = [], {}
    for key, model in profile.models.items():
        knob = f"SEAT_MODEL_{key.upper()}_DIR"
        meaning = f"host directory of the {key} model"
        if model.build:  # built by a native profile's `seat setup`, in SEAT_HOME as it is there
            built = f"${{SEAT_HOME:-${{XDG_CACHE_HOME:-$HOME/.cache}}/seatkit}}/models/{model.build}"
            knobs.append(Knob(knob, str(layout.model(model.build)), meaning, shell_default=built))
            fetch = f"seat setup of a native profile that builds {model.build} makes it, or "
        else:
            assert model.host_dir is not None  # a model dir gives build or host_dir (ModelDir)
            knobs.append(Knob(knob, model.host_dir, meaning))
            fetch = f"seat model fetch {profile.name} downloads it, or " if model.repository else ""
        assert model.mount is not None  # a docker profile mounts every model (its section checks)
        mounts.append(Mount((Ref(knob),), model.mount, read_only=True))
        model_paths[key] = (model.mount,)
        missing = f"{fetch}set {knob} to the folder that has it"
        checks += _model_checks(key, model, (Ref(knob),), locked.get(key), missing)
    if docker.cache:
        meaning = "persistent JIT cache (one per image and profile)"
        knobs.append(Knob("SEAT_CACHE_DIR", docker.cache.host_dir, meaning))
        mounts.append(Mount((Ref("SEAT_CACHE_DIR"),), docker.cache.mount, read_only=False))
        checks.append(Check(Kind.CACHE, (Ref("SEAT_CACHE_DIR"),), "cache"))
        knobs += nsys.knobs(profile.name, docker.cache.mount)
    mounts += [Mount((m.source,), m.target, m.read_only) for m in docker.extra_mounts]
    # docker run -v would create a missing source as an empty root-owned folder; seat up would fail
    checks += [Check(Kind.EXISTS, (m.source,), "extra mount source") for m in docker.extra_mounts]
    return _Runtime(knobs, checks, [("vllm",), ("serve",)], model_paths, mounts)


def _command(profile: Profile, program: list[Word], model_paths: dict[str, Word]) -> list[Word]:
    """The server's argv: the program, the model, where it listens, and the profile's flags."""
    server, tp = profile.server, profile.gpus.tensor_parallel_size
    command = [
        *program,
        model_paths[profile.model],
        ("--host",),
        (Ref("SEAT_HOST"),),
        ("--port",),
        (Ref("SEAT_PORT"),),
        ("--served-model-name",),
        (server.served_model_name,),
    ]
    if tp > 1:
        command += [("--tensor-parallel-size",), (str(tp),)]
    spec_json = speculative_config(profile, model_paths)
    if spec_json:
        command += [("--speculative-config",), spec_json]
    return command + [(arg,) for arg in vllm_flags(profile)]


def build(profile: Profile) -> LaunchSpec:
    server = profile.server
    knobs = [
        Knob("SEAT_HOST", server.host, "address the server binds", pattern=grammar.HOST, what=HOST_WHAT),
        Knob(
            "SEAT_PORT", str(server.port), "port the server listens on", pattern=grammar.PORT, what=PORT_WHAT
        ),
    ]
    host, port = (Ref("SEAT_HOST"),), (Ref("SEAT_PORT"),)
    checks = [
        Check(Kind.RESERVED_PORT, port, "port", tuple(map(str, server.reserved_ports))),
        Check(Kind.PORT_FREE, host + (":",) + port, "port"),
    ]
    locked = lock.read(profile) or {}
    lock.refuse_weightless(profile, locked)
    runtime = (
        _native(profile, locked, knobs, checks)
        if isinstance(profile, NativeProfile)
        else _docker(profile, locked, knobs, checks)
    )
    knobs, checks = runtime.knobs, runtime.checks
    if profile.gpus.count:
        checks.append(Check(Kind.GPUS, (), "GPUs", (str(profile.gpus.tensor_parallel_size),)))
    api_key_file = None
    if server.api_key:
        knobs.append(
            Knob(
                "SEAT_API_KEY_FILE",
                str(layout.keys(profile.name)),
                "file holding the API key (mode 0600; `seat up` makes it)",
                shell_default=keys.shell_key_file(profile.name),
            )
        )
        api_key_file = (Ref("SEAT_API_KEY_FILE"),)
        checks.append(Check(Kind.API_KEY, api_key_file, "API key file"))
    return LaunchSpec(
        profile=profile,
        knobs=knobs,
        env={**profile.env, **(profile.docker.extra_env if profile.docker else {})},
        command=_command(profile, runtime.program, runtime.model_paths),
        checks=checks,
        mounts=runtime.mounts,
        unset_env=list(profile.docker.unset_env if profile.docker else []),
        api_key_file=api_key_file,
        venv=runtime.venv,
        wraps=nsys.wraps() if profile.docker and profile.docker.cache else {},  # traces go in the cache
        pass_env=list(profile.docker.pass_env) if profile.docker else [],
    )


def _model_checks(key: str, model, where: Word, locked, missing: str) -> list[Check]:
    label = f"{key} model"
    checks = [Check(Kind.DIR, where, label, hint=missing)]
    checks += [Check(Kind.FILE, where + (f"/{name}",), f"{label} {name}") for name in model.files]
    if model.shards_from_index:
        checks.append(Check(Kind.SHARDS, where, label))
    if locked:  # every file's size against the models lock: a directory walk, so always on
        checks.append(Check(Kind.SIZES, where, label, tuple((f.path, f.size) for f in locked.files)))
    return checks
