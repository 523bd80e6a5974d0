"""A seat described as data: profiles/*.yaml, validated on load, with `extends` for variants."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.validation import validate

DEFAULT_PROFILE = "dsv4-flash-dspark-tp4"
EMBEDDED_DEFAULT = "cpu-smoke"


def _absolute(value: str) -> str:
    if not PurePosixPath(value).is_absolute():
        raise ValueError(f"must be an absolute path, got {value!r}")
    return value


def _env_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ValueError(f"must be an environment variable name, got {value!r}")
    return value


def _flag_name(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*(=[^=]+)?", value) or value.startswith("-"):
        raise ValueError(f"must be a vLLM flag without its leading dashes, got {value!r}")
    return value


AbsPath = Annotated[str, AfterValidator(_absolute)]
EnvName = Annotated[str, AfterValidator(_env_name)]
FlagName = Annotated[str, AfterValidator(_flag_name)]
Port = Annotated[int, Field(ge=1, le=65535)]
Scalar = str | bool | int | float


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Image(Strict):
    """The base image; with `overlay`, the seat runs what `seat build` layers onto it."""
    name: str = Field(min_length=1)
    tag: str = Field(min_length=1)
    digest: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None
    overlay: bool = False
    vllm_dir: str = Field(default="/opt/venv/lib/python3.12/site-packages/vllm", pattern=r"^/")
    smoke_imports: list[Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*$")]] = []

    @property
    def reference(self) -> str:
        """What docker runs: pinned by digest when there is one."""
        ref = f"{self.name}:{self.tag}"
        return f"{ref}@{self.digest}" if self.digest else ref


class Server(Strict):
    host: str = "127.0.0.1"
    port: Port = 8000
    served_model_name: str = Field(min_length=1)
    api_key: bool = False
    health_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    reserved_ports: list[Port] = []
    reserved_names: list[str] = []

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
            raise ValueError(f"tensor_parallel_size {self.tensor_parallel_size} does not divide "
                             f"the {self.count} GPUs")
        if self.count and self.tensor_parallel_size > self.count:
            raise ValueError(f"tensor_parallel_size {self.tensor_parallel_size} needs at least "
                             f"that many GPUs, count is {self.count}")
        return self


class ModelDir(Strict):
    """A model directory: where it lives on the host and what preflight checks in it."""

    host_dir: AbsPath | None = None
    mount: AbsPath | None = None
    build: Literal["tiny-llama"] | None = None
    files: list[str] = ["config.json"]
    shards_from_index: bool = False

    @model_validator(mode="after")
    def _one_source(self):
        if (self.host_dir is None) == (self.build is None):
            raise ValueError("give exactly one of host_dir (a directory on the host) or build "
                             "(a model the kit builds locally)")
        if self.shards_from_index and "model.safetensors.index.json" not in self.files:
            raise ValueError("shards_from_index needs model.safetensors.index.json in files")
        return self


class Speculative(Strict):
    method: str = Field(min_length=1)
    num_speculative_tokens: Annotated[int, Field(ge=1, le=16)]
    draft_model: str | None = None
    config: dict[str, Any] = {}

    @model_validator(mode="after")
    def _consistent(self):
        clash = {"method", "num_speculative_tokens", "model"} & set(self.config)
        if clash:
            raise ValueError(f"config repeats {sorted(clash)}: set them as fields of speculative")
        temps = self.config.get("dspark_sts_temperatures")
        if temps is not None:
            if not isinstance(temps, list) or len(temps) != self.num_speculative_tokens:
                raise ValueError("config.dspark_sts_temperatures must list one temperature per "
                                 f"draft position ({self.num_speculative_tokens})")
            if not all(isinstance(t, (int, float)) and t > 0 for t in temps):
                raise ValueError("config.dspark_sts_temperatures must all be numbers above 0")
        return self


class ForkOnly(Strict):
    """What only the b12x fork knows: `seat lint` reports these as fork-only, not unknown."""

    args: list[FlagName] = []
    speculative_keys: list[str] = []
    reason: str = ""


class Cache(Strict):
    host_dir: AbsPath
    mount: AbsPath


class Docker(Strict):
    container_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
    gpus: Literal["all"] | list[Annotated[int, Field(ge=0)]] = "all"
    ipc: Literal["host", "private", "shareable"] = "host"
    network: Literal["host", "none"] = "host"
    init: bool = True
    ulimits: dict[str, int] = {}
    cache: Cache | None = None
    unset_env: list[EnvName] = []
    stop_grace_s: Annotated[int, Field(ge=1)] = 120
    restart: Literal["no", "unless-stopped", "on-failure", "always"] = "unless-stopped"


class Native(Strict):
    """A seat run as a local process from a venv the kit makes (no docker)."""

    python: str = "python3.11"
    venv: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")]
    packages: list[str] = Field(min_length=1)
    constraints: list[str] = []
    remove: list[str] = []
    metadata_shim: str | None = None
    preload_iomp: bool = False


class Rig(Strict):
    """The hardware and software the profile was made for (documentation only)."""

    gpus: str = ""
    interconnect: str = ""
    power: str = ""
    cpu: str = ""
    driver: str = ""
    cuda: str = ""
    software: dict[str, str] = {}


class Decision(Strict):
    topic: str
    chosen: str
    why: str


DnsLabel = Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$")]
LabelValue = Annotated[str, Field(pattern=r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")]


class Kubernetes(Strict):
    """Many identical seats, one per GPU node, rendered into k8s/<profile>/ by `seat render`."""

    name: DnsLabel | None = None  # the workload's name; default: the profile's, made DNS-safe
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


class Profile(Strict):
    name: str
    description: str
    runtime: Literal["docker", "native"]
    image: Image | None = None
    docker: Docker | None = None
    native: Native | None = None
    server: Server
    gpus: Gpus
    models: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")], ModelDir]
    model: str
    speculative: Speculative | None = None
    vllm_args: dict[FlagName, Scalar | list | dict] = {}
    fork_only: ForkOnly = ForkOnly()
    env: dict[EnvName, str] = {}
    rig: Rig = Rig()
    kubernetes: Kubernetes | None = None
    decisions: list[Decision] = []
    source: str = Field("", exclude=True)
    sha256: str = Field("", exclude=True)

    @model_validator(mode="after")
    def _runtime_parts(self):
        if self.runtime == "docker":
            missing = [k for k in ("image", "docker") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"runtime docker needs {' and '.join(missing)}")
            unmounted = [k for k, m in self.models.items() if m.mount is None or m.build]
            if unmounted:
                raise ValueError(f"runtime docker needs host_dir and mount for models {unmounted}")
        elif self.native is None:
            raise ValueError("runtime native needs a native section")
        if self.model not in self.models:
            raise ValueError(f"model {self.model!r} is not one of models {sorted(self.models)}")
        spec = self.speculative
        if spec and spec.draft_model is not None and spec.draft_model not in self.models:
            raise ValueError(f"speculative.draft_model {spec.draft_model!r} is not one of "
                             f"models {sorted(self.models)}")
        kube = self.kubernetes
        if kube and self.runtime != "docker":
            raise ValueError("kubernetes needs runtime docker (the pod runs the seat's image)")
        if kube and kube.models_volume == "pvc" and set(kube.model_claims) != set(self.models):
            raise ValueError(f"kubernetes.model_claims must name a claim for each of models "
                             f"{sorted(self.models)}")
        reserved = {"model", "host", "port", "served-model-name", "tensor-parallel-size",
                    "speculative-config", "api-key"}
        owned = reserved & set(self.vllm_args)
        if owned:
            raise ValueError(f"vllm_args sets {sorted(owned)}, which the profile's own fields "
                             "set (server, gpus, model, speculative)")
        return self


def profile_path(name_or_path: str) -> Path:
    """A profile by name (profiles/NAME.yaml) or by path."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or "/" in name_or_path:
        return candidate
    return paths.PROFILES / f"{name_or_path}.yaml"


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
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise SeatError(f"no profile at {path}",
                        f"known profiles: {', '.join(profile_names()) or 'none'}") from None
    except yaml.YAMLError as exc:
        raise SeatError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SeatError(f"{path}: a profile is a mapping of fields, got {type(data).__name__}")
    return data


def _raw(path: Path, seen: tuple[Path, ...] = ()) -> tuple[dict, list[Path]]:
    """The profile's fields with every `extends` applied, and the files they came from."""
    path = path.resolve()
    if path in seen:
        chain = " -> ".join(p.name for p in (*seen, path))
        raise SeatError(f"{path}: extends loops back on itself ({chain})")
    data = _read_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data, [path]
    if not isinstance(parent, str):
        raise SeatError(f"{path}: field 'extends': expected a profile name, got {parent!r}")
    base_path = profile_path(parent) if "/" in parent else path.parent / f"{parent}.yaml"
    base, files = _raw(base_path, (*seen, path))
    return _merge(base, data), [*files, path]


def load(name_or_path: str) -> Profile:
    """Load, merge and validate a profile; every bad field is named with what was expected."""
    path = profile_path(name_or_path)
    data, files = _raw(path)
    data["name"] = path.stem  # a profile is named by its file, never by a field it inherits
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    via = f" (extends {', '.join(f.name for f in files[:-1])})" if len(files) > 1 else ""
    return validate(Profile, {**data, "source": str(path), "sha256": digest}, path, "profile",
                    "fix the fields named above; profiles/ holds working examples", via)
