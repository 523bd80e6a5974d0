"""A seat described as data: profiles/*.yaml, validated on load, with `extends` for variants."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from seatkit import paths, safe_yaml
from seatkit.errors import SeatError
from seatkit.seat import what_runs
from seatkit.seat.grammar import (
    PROFILE_NAME,
    ContainerName,
    ContainerPath,
    Host,
    HostPath,
    ImageName,
    ImageTag,
    Key,
    ModelFile,
    ProfileName,
    Program,
    Requirement,
    ServedName,
    Text,
    Version,
    matches,
)
from seatkit.validation import validate

DEFAULT_PROFILE = "dsv4-flash-dspark-tp4"
EMBEDDED_DEFAULT = "cpu-smollm2"


def _no_nul(value: str) -> str:
    """A value that reaches argv or the environment: execve and bash cannot carry a NUL byte."""
    if "\x00" in value:
        raise ValueError(f"must not hold a NUL byte, got {value!r}")
    return value


def _env_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ValueError(f"must be an environment variable name, got {value!r}")
    return value


def _flag_name(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*(=[^=]+)?", value) or value.startswith("-"):
        raise ValueError(f"must be a vLLM flag without its leading dashes, got {value!r}")
    return value


def _plain(value: str) -> str:
    """Text that means the same in bash, compose and docker: no quotes, $, backticks, backslashes
    or control characters, so it can land anywhere without an escape going wrong."""
    if not value or re.search(r"[\x00-\x1f\x7f'\"`$\\]", value):
        raise ValueError(
            f"must be non-empty plain text without quotes, $, backticks, backslashes "
            f"or newlines, got {value!r}"
        )
    return value


def _mount_path(value: str) -> str:
    if not PurePosixPath(_plain(value)).is_absolute():
        raise ValueError(f"must be an absolute path, got {value!r}")
    if set(value) & {":", ","} or ".." in PurePosixPath(value).parts:
        raise ValueError(f"must be an absolute path without ':', ',' or '..' (docker mounts), got {value!r}")
    return "/" + "/".join(
        PurePosixPath(value).parts[1:]
    )  # one spelling: '/cache/.' and '//cache' are '/cache'


def _overlaps(a: str, b: str) -> bool:
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def _upper_env_name(value: str) -> str:
    if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", value):
        raise ValueError(f"must be an environment variable name ([A-Z_][A-Z0-9_]*), got {value!r}")
    return value


PlainText = Annotated[str, AfterValidator(_plain)]
# Any text bash and compose can quote, but not NUL: no process environment can carry it.
EnvValue = Annotated[str, AfterValidator(_no_nul)]
MountPath = Annotated[str, AfterValidator(_mount_path)]
UpperEnvName = Annotated[str, AfterValidator(_upper_env_name)]
EnvName = Annotated[str, AfterValidator(_env_name)]
FlagName = Annotated[str, AfterValidator(_flag_name)]
Port = Annotated[int, Field(ge=1, le=65535)]
Scalar = str | bool | int | float
# Docker's own set of ulimit names (docker run --ulimit, compose ulimits).
UlimitName = Literal[
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Image(Strict):
    """The base image; with `overlay`, the seat runs what `seat build` layers onto it."""

    name: ImageName
    tag: ImageTag
    digest: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None
    overlay: bool = False
    vllm_dir: ContainerPath = "/opt/venv/lib/python3.12/site-packages/vllm"
    # The b12x kernel package: its gemm/dense.py is hashed into the image's labels, and a pinned
    # b12x overlay (overlay/b12x.lock) is copied over it.
    b12x_dir: ContainerPath = "/opt/venv/lib/python3.12/site-packages/b12x"
    smoke_imports: list[Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*$")]] = []
    # An image built elsewhere: `seat up` reports how its vllm package differs from the overlay lock.
    compare_overlay: bool = False

    @property
    def reference(self) -> str:
        """What docker runs: pinned by digest when there is one."""
        ref = f"{self.name}:{self.tag}"
        return f"{ref}@{self.digest}" if self.digest else ref


class Server(Strict):
    host: Host = "127.0.0.1"
    port: Port = 8000
    served_model_name: ServedName
    api_key: bool = False
    health_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    reserved_ports: list[Port] = []
    reserved_names: list[ContainerName] = []

    @model_validator(mode="after")
    def _port_not_reserved(self):
        if self.port in self.reserved_ports:
            raise ValueError(f"port {self.port} is listed in reserved_ports")
        return self


class Gpus(Strict):
    count: Annotated[int, Field(ge=0, le=64)]
    tensor_parallel_size: Annotated[int, Field(ge=1, le=64)] = 1

    @model_validator(mode="after")
    def _tp_divides(self):
        if self.count and self.count % self.tensor_parallel_size:
            raise ValueError(
                f"tensor_parallel_size {self.tensor_parallel_size} does not divide the {self.count} GPUs"
            )
        if self.count and self.tensor_parallel_size > self.count:
            raise ValueError(
                f"tensor_parallel_size {self.tensor_parallel_size} needs at least "
                f"that many GPUs, count is {self.count}"
            )
        return self


# A hub repository (owner/name, neither starting with '-' or '.': it reaches `hf`'s argv) and a commit.
HUB_REPOSITORY = r"^\w[\w.-]*/\w[\w.-]*$"
HUB_REVISION = r"^[0-9a-f]{40}$"


class ModelDir(Strict):
    """A model directory: where it lives on the host and what preflight checks in it."""

    host_dir: HostPath | None = None
    mount: HostPath | None = None
    build: Literal["tiny-llama", "smollm2-135m"] | None = None
    files: list[ModelFile] = ["config.json"]
    shards_from_index: bool = False
    # Where the files come from on the hub, and at which commit (`seat model fetch`, the lock).
    repository: Annotated[str, Field(pattern=HUB_REPOSITORY)] | None = None
    revision: Annotated[str, Field(pattern=HUB_REVISION)] | None = None

    @model_validator(mode="after")
    def _one_source(self):
        if (self.host_dir is None) == (self.build is None):
            raise ValueError(
                "give exactly one of host_dir (a directory on the host) or build "
                "(a model the kit builds locally)"
            )
        if self.shards_from_index and "model.safetensors.index.json" not in self.files:
            raise ValueError("shards_from_index needs model.safetensors.index.json in files")
        return self


class Speculative(Strict):
    method: Key
    num_speculative_tokens: Annotated[int, Field(ge=1, le=16)]
    draft_model: Key | None = None
    config: dict[str, Any] = {}

    @model_validator(mode="after")
    def _consistent(self):
        clash = {"method", "num_speculative_tokens", "model"} & set(self.config)
        if clash:
            raise ValueError(f"config repeats {sorted(clash)}: set them as fields of speculative")
        temps = self.config.get("dspark_sts_temperatures")
        if temps is not None:
            if not isinstance(temps, list) or len(temps) != self.num_speculative_tokens:
                raise ValueError(
                    "config.dspark_sts_temperatures must list one temperature per "
                    f"draft position ({self.num_speculative_tokens})"
                )
            if not all(isinstance(t, (int, float)) and t > 0 for t in temps):
                raise ValueError("config.dspark_sts_temperatures must all be numbers above 0")
        return self


class ForkOnly(Strict):
    """What only the b12x fork knows: `seat lint` reports these as fork-only, not unknown."""

    args: list[FlagName] = []
    speculative_keys: list[Key] = []
    reason: Text = ""


class Cache(Strict):
    host_dir: HostPath
    mount: HostPath


class ExtraMount(Strict):
    """A bind mount for experiments (the original script's EXTRA_MOUNTS)."""

    source: MountPath
    target: MountPath
    read_only: bool = True


class Docker(Strict):
    container_name: ContainerName
    gpus: Literal["all"] | list[Annotated[int, Field(ge=0)]] = "all"
    ipc: Literal["host", "private", "shareable"] = "host"
    network: Literal["host", "none"] = "host"
    init: bool = True
    ulimits: dict[UlimitName, Annotated[int, Field(ge=-1)]] = {}  # -1: unlimited
    cache: Cache | None = None
    unset_env: list[EnvName] = []
    stop_grace_s: Annotated[int, Field(ge=1)] = 120
    restart: Literal["no", "unless-stopped", "on-failure", "always"] = "unless-stopped"
    # Experiments (the original's EXTRA_MOUNTS / EXTRA_ENVS), rendered into every launch form.
    extra_mounts: list[ExtraMount] = []
    extra_env: dict[UpperEnvName, PlainText] = {}
    # Passed from the launching shell into the container only when set there.
    pass_env: list[UpperEnvName] = []

    @model_validator(mode="after")
    def _extras_distinct(self):
        targets = [m.target for m in self.extra_mounts] + ([self.cache.mount] if self.cache else [])
        if len(targets) != len(set(targets)):
            raise ValueError(f"extra_mounts repeat a target (or the cache's): {sorted(targets)}")
        both = set(self.extra_env) & set(self.pass_env)
        if both:
            raise ValueError(f"{sorted(both)} are both in extra_env and pass_env: keep one")
        unset = {*self.extra_env, *self.pass_env} & set(self.unset_env)
        if unset:
            raise ValueError(
                f"{sorted(unset)} are also in unset_env, whose `env -u` removes them "
                "before the server starts: keep one"
            )
        knobs = [n for n in [*self.extra_env, *self.pass_env] if n.startswith("SEAT_")]
        if knobs:
            raise ValueError(
                f"{knobs} are the kit's own SEAT_* names (knobs the script sets "
                "without exporting): pick another name"
            )
        if "VLLM_API_KEY" in {*self.extra_env, *self.pass_env}:
            raise ValueError(
                "VLLM_API_KEY comes only from the key file (server.api_key: true), "
                "not from extra_env or pass_env"
            )
        secrets = [n for n in self.pass_env if re.search(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL", n)]
        if secrets:
            raise ValueError(
                f"pass_env {secrets} look like credentials: the launch prints every "
                "pass_env value in its configuration line"
            )
        return self


class Native(Strict):
    """A seat run as a local process from a venv the kit makes (no docker)."""

    python: Program = "python3.11"
    venv: ContainerName
    packages: list[Requirement] = Field(min_length=1)
    constraints: list[Requirement] = []
    remove: list[Requirement] = []
    metadata_shim: Version | None = None
    preload_iomp: bool = False


class Rig(Strict):
    """The hardware and software the profile was made for (documentation only)."""

    gpus: Text = ""
    interconnect: Text = ""
    power: Text = ""
    power_limit_w: Annotated[float, Field(gt=0)] | None = None  # per GPU, for `seat doctor`
    cpu: Text = ""
    driver: Text = ""
    cuda: Text = ""
    software: dict[Text, Text] = {}


class Decision(Strict):
    topic: Text
    chosen: Text
    why: Text


DnsLabel = Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$")]
LabelValue = Annotated[str, Field(pattern=r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")]


class Kubernetes(Strict):
    """Many identical seats, one per GPU node, rendered into k8s/<profile>/ by `seat render`."""

    # The workload's name, also its Services' (DNS-1035: a letter first); default: the profile's.
    name: Annotated[str, Field(pattern=r"^[a-z]([a-z0-9-]{0,40}[a-z0-9])?$")] | None = None
    namespace: DnsLabel = "default"
    replicas: Annotated[int, Field(ge=1, le=256)] = 1
    image: Annotated[str, Field(pattern=r"^[a-z0-9][A-Za-z0-9._/:@-]*$")] | None = None
    # Values of nvidia.com/gpu.product, the node label GPU feature discovery sets; a node qualifies
    # when its label is any of them (the original rig mixes Workstation and Max-Q cards).
    gpu_products: list[LabelValue] = Field(min_length=1)
    host_profile: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")] = "paper"
    driver: Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+){1,2}$")]  # decides the registry-key form
    models_volume: Literal["hostPath", "pvc"] = "hostPath"
    model_claims: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")], DnsLabel] = {}
    api_key_secret: DnsLabel
    gpu_operator_namespace: DnsLabel = "gpu-operator"


class Experiment(Strict):
    """The one way past the refusals of what_runs.yaml: every result of the seat says UNVERIFIED."""

    unverified: Literal[True]
    reason: Annotated[Text, Field(min_length=1, max_length=200)]  # printed beside every number


class Profile(Strict):
    name: ProfileName
    description: Text
    runtime: Literal["docker", "native"]
    image: Image | None = None
    docker: Docker | None = None
    native: Native | None = None
    server: Server
    gpus: Gpus
    models: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")], ModelDir]
    model: Key
    speculative: Speculative | None = None
    vllm_args: dict[FlagName, Scalar | list | dict] = {}
    fork_only: ForkOnly = ForkOnly()
    env: dict[EnvName, EnvValue] = {}
    rig: Rig = Rig()
    kubernetes: Kubernetes | None = None
    decisions: list[Decision] = []
    experiment: Experiment | None = None
    source: str = Field("", exclude=True)
    sha256: str = Field("", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nul_anywhere(cls, data):
        """No string of a profile may hold a NUL byte: execve and bash cannot carry one."""

        def walk(value, where):
            if isinstance(value, str) and "\x00" in value:
                raise ValueError(f"{where} must not hold a NUL byte, got {value!r}")
            items = (
                value.items()
                if isinstance(value, dict)
                else enumerate(value)
                if isinstance(value, list)
                else ()
            )
            for key, item in items:
                walk(key, where)
                walk(item, f"{where}.{key}")

        for key, value in data.items() if isinstance(data, dict) else ():
            walk(value, key)
        return data

    @model_validator(mode="after")
    def _runtime_parts(self):
        if self.runtime == "docker":
            missing = [k for k in ("image", "docker") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"runtime docker needs {' and '.join(missing)}")
            unmounted = [k for k, m in self.models.items() if m.mount is None]
            if unmounted:
                raise ValueError(f"runtime docker needs a mount for models {unmounted}")
        elif self.native is None:
            raise ValueError("runtime native needs a native section")
        if self.model not in self.models:
            raise ValueError(f"model {self.model!r} is not one of models {sorted(self.models)}")
        spec = self.speculative
        if spec and spec.draft_model is not None and spec.draft_model not in self.models:
            raise ValueError(
                f"speculative.draft_model {spec.draft_model!r} is not one of models {sorted(self.models)}"
            )
        kube = self.kubernetes
        if kube and self.runtime != "docker":
            raise ValueError("kubernetes needs runtime docker (the pod runs the seat's image)")
        if kube and kube.models_volume == "pvc" and set(kube.model_claims) != set(self.models):
            raise ValueError(
                f"kubernetes.model_claims must name a claim for each of models {sorted(self.models)}"
            )
        if "VLLM_API_KEY" in self.env:
            raise ValueError(
                "env VLLM_API_KEY: VLLM_API_KEY comes only from the key file "
                "(server.api_key: true) or, in a pod, its Secret; a profile is committed"
            )
        knobs = sorted(n for n in self.env if n.startswith("SEAT_"))
        if knobs:  # e.g. SEAT_SKIP_OVERLAY_CHECK would switch off the image's start check unseen
            raise ValueError(
                f"env {knobs}: SEAT_* names are the kit's own knobs and switches, set "
                "at launch, never by a profile: pick another name"
            )
        reserved = {
            "model",
            "host",
            "port",
            "served-model-name",
            "tensor-parallel-size",
            "speculative-config",
            "api-key",
        }
        if self.docker:
            clash = (set(self.docker.extra_env) | set(self.docker.pass_env)) & set(self.env)
            # What the kit mounts: an extra mount on, inside or over one would change it unseen.
            owned_paths = [m.mount for m in self.models.values()] + (
                [self.docker.cache.mount] if self.docker.cache else []
            )
            mounts = {
                m.target
                for m in self.docker.extra_mounts
                if any(_overlaps(m.target, owned) for owned in owned_paths)
            }
            if clash or mounts:
                raise ValueError(f"docker extras repeat what the profile sets: {sorted(clash | mounts)}")
        if self.experiment is None:
            self._runs_what_is_locked()
        owned = reserved & set(self.vllm_args)
        if owned:
            raise ValueError(
                f"vllm_args sets {sorted(owned)}, which the profile's own fields "
                "set (server, gpus, model, speculative)"
            )
        return self

    def _runs_what_is_locked(self) -> None:
        """No environment name or mount target that changes what is executed or imported."""
        found = what_runs.refused_env("env", self.env) + what_runs.refused_args(self.vllm_args)
        image = self.image or Image(name="none", tag="none")
        if self.docker:
            found += what_runs.refused_env("docker.extra_env", self.docker.extra_env)
            found += what_runs.refused_env("docker.pass_env", self.docker.pass_env)
            # `env -u` before the server: the image's PATH (or PYTHONNOUSERSITE) gone changes what
            # runs as setting it would, and the outside check resolves with the image's.
            found += what_runs.refused_env("docker.unset_env", self.docker.unset_env)
        found += filter(
            None,
            (
                what_runs.refused_mount(field, target, image.vllm_dir, image.b12x_dir)
                for field, target in what_runs.mounts(self).items()
            ),
        )
        if found:
            raise ValueError(
                "these would change what the seat executes or imports, so the overlay "
                "check could pass while other code runs: "
                + "; ".join(found)
                + " (an experiment says so: experiment: {unverified: true, reason: ...}, "
                "and its results are marked UNVERIFIED)"
            )


def profile_path(name_or_path: str) -> Path:
    """A profile by name (profiles/NAME.yaml) or by path."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or "/" in name_or_path:
        return candidate
    return paths.PROFILES / f"{name_or_path}.yaml"


def name_of(name_or_path: str) -> str:
    """The name a seat runs under: a profile's file name, whether it is given by name or by path
    (the file need not exist any more: a seat whose profile was deleted can still be stopped)."""
    name = profile_path(name_or_path).stem
    if not matches(PROFILE_NAME, name):
        raise SeatError(
            f"{name_or_path!r} names no profile ({PROFILE_NAME})",
            "give a profile's name or the path of its YAML file",
        )
    return name


def profile_names() -> list[str]:
    return sorted(p.stem for p in paths.PROFILES.glob("*.yaml"))


def _merge(base: dict, override: dict) -> dict:
    """Mappings merge key by key; anything else in the override replaces the base's value."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_yaml(path: Path) -> dict:
    try:
        data = safe_yaml.read(path, "profile")
    except IsADirectoryError:
        raise SeatError(
            f"{path} is a folder, not a profile's YAML file",
            "give the path of the .yaml file itself, or a name from profiles/",
        ) from None
    except (FileNotFoundError, NotADirectoryError):
        raise SeatError(
            f"no profile at {path}", f"profiles: {', '.join(profile_names()) or 'none'}"
        ) from None
    if not isinstance(data, dict):
        got = "an empty file" if data is None else ("a list" if isinstance(data, list) else "a single value")
        raise SeatError(
            f"{path}: a profile is a mapping of fields (name: value lines), got {got}",
            "profiles/ holds working examples",
        )
    return data


def _raw(path: Path, seen: tuple[Path, ...] = ()) -> tuple[dict, list[Path]]:
    """The profile's fields with every `extends` applied, and the files they came from."""
    try:
        path = path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise SeatError(f"{path}: cannot resolve the path ({exc})") from None
    if path in seen:
        chain = " -> ".join(p.name for p in (*seen, path))
        raise SeatError(f"{path}: extends loops back on itself ({chain})")
    data = _read_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data, [path]
    if not isinstance(parent, str) or not matches(PROFILE_NAME, parent):
        raise SeatError(
            f"{path}: field 'extends': expected the name of a profile (beside it or in profiles/) "
            f"({PROFILE_NAME}), got {parent!r}",
            "name the profile, never a path",
        )
    # A variant's siblings first, then the kit's profiles; a file named like the profile it extends
    # (a local copy of a kit profile) extends the kit's own.
    beside = path.parent / f"{parent}.yaml"
    own = beside.exists() and beside.resolve() != path
    base, files = _raw(beside if own else paths.PROFILES / f"{parent}.yaml", (*seen, path))
    return _merge(base, data), [*files, path]


def load(name_or_path: str) -> Profile:
    """Load, merge and validate a profile; every bad field is named with what was expected."""
    path = profile_path(name_or_path)
    if not matches(PROFILE_NAME, path.stem):
        raise SeatError(
            f"{path}: a profile is named by its file, and {path.stem!r} is not a profile "
            f"name ({PROFILE_NAME})",
            "rename the file",
        )
    data, files = _raw(path)
    data["name"] = path.stem  # a profile is named by its file, never by a field it inherits
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    via = f" (extends {', '.join(f.name for f in files[:-1])})" if len(files) > 1 else ""
    return validate(
        Profile,
        {**data, "source": str(path), "sha256": digest},
        path,
        "profile",
        "fix the fields named above; profiles/ holds working examples",
        via,
    )
