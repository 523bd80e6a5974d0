"""The sections of a profile: the image, the server, the GPUs, the models and each runtime's own."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from seatkit.seat.fields import (
    EnvName,
    FlagName,
    MountPath,
    PlainText,
    Port,
    Strict,
    UlimitName,
    UpperEnvName,
)
from seatkit.seat.grammar import (
    ContainerName,
    ContainerPath,
    Host,
    HostPath,
    ImageName,
    ImageTag,
    Key,
    ModelFile,
    Program,
    Requirement,
    ServedName,
    Text,
    Version,
)


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
        # vLLM reads a key's dashes as underscores: num-speculative-tokens is the field's too
        clash = {"method", "num_speculative_tokens", "model"} & {k.replace("-", "_") for k in self.config}
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
    """A profile that says it is an experiment: every result of the seat says UNVERIFIED, with its reason."""

    unverified: Literal[True]
    reason: Annotated[Text, Field(min_length=1, max_length=200)]  # printed beside every number
