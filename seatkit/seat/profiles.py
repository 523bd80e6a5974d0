"""A seat described as data: profiles/*.yaml, validated on load, with `extends` for variants.

A profile is one of its runtime's variants (the union Profile, tagged by `runtime`): a docker seat
always has its image and docker sections, a native seat its native section.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from seatkit import paths, safe_yaml
from seatkit.errors import SeatError
from seatkit.seat import what_runs
from seatkit.seat.fields import EnvName, EnvValue, FlagName, Scalar, Strict, overlaps
from seatkit.seat.grammar import PROFILE_NAME, Key, ProfileName, Text, matches
from seatkit.seat.sections import (
    Decision,
    Docker,
    Experiment,
    ForkOnly,
    Gpus,
    Image,
    Kubernetes,
    ModelDir,
    Native,
    Rig,
    Server,
    Speculative,
)
from seatkit.validation import validate

DEFAULT_PROFILE = "dsv4-flash-dspark-tp4"
EMBEDDED_DEFAULT = "cpu-smollm2"


class BaseProfile(Strict):
    """What every profile has, whatever runs it."""

    name: ProfileName
    description: Text
    runtime: Literal["docker", "native"]
    image: Image | None = None
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
    extended: tuple[str, ...] = Field((), exclude=True)  # the files it extends, the nearest last
    sha256: str = Field("", exclude=True)

    @model_validator(mode="after")
    def _consistent(self):
        if self.model not in self.models:
            raise ValueError(f"model {self.model!r} is not one of models {sorted(self.models)}")
        spec = self.speculative
        if spec and spec.draft_model is not None and spec.draft_model not in self.models:
            raise ValueError(
                f"speculative.draft_model {spec.draft_model!r} is not one of models {sorted(self.models)}"
            )
        kube = self.kubernetes
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
        if knobs:  # e.g. SEAT_HOST would move the bind, unseen by the launch
            raise ValueError(
                f"env {knobs}: SEAT_* names are the kit's own knobs and switches, set "
                "at launch, never by a profile: pick another name"
            )
        self._section_checks()
        owned = what_runs.owned_args(self.vllm_args)  # what the profile's own fields set (what_runs.yaml)
        if owned:
            raise ValueError(f"{'; '.join(owned)}: the profile's own fields set these, never vllm_args")
        return self

    def _section_checks(self) -> None:
        """The runtime's own section against the rest (none, unless it says)."""


def _check_docker(profile: BaseProfile, docker: Docker) -> None:
    """A docker section against the rest of its profile."""
    clash = (set(docker.extra_env) | set(docker.pass_env)) & set(profile.env)
    # What the kit mounts: an extra mount on, inside or over one would change it unseen.
    owned_paths = [m.mount for m in profile.models.values()] + ([docker.cache.mount] if docker.cache else [])
    mounts = {
        m.target
        for m in docker.extra_mounts
        if any(overlaps(m.target, owned) for owned in owned_paths if owned)
    }
    if clash or mounts:
        raise ValueError(f"docker extras repeat what the profile sets: {sorted(clash | mounts)}")


class DockerProfile(BaseProfile):
    """A seat run in a container of its image."""

    runtime: Literal["docker"]
    image: Image
    docker: Docker
    # Unused, yet validated as before the split: a variant of a native profile may keep its section.
    native: Native | None = None

    @model_validator(mode="before")
    @classmethod
    def _has_its_sections(cls, data):
        missing = [k for k in ("image", "docker") if isinstance(data, dict) and data.get(k) is None]
        if missing:
            raise ValueError(f"runtime docker needs {' and '.join(missing)}")
        return data

    def _section_checks(self) -> None:
        unmounted = [k for k, m in self.models.items() if m.mount is None]
        if unmounted:
            raise ValueError(f"runtime docker needs a mount for models {unmounted}")
        _check_docker(self, self.docker)


class NativeProfile(BaseProfile):
    """A seat run as a local process from a venv the kit makes."""

    runtime: Literal["native"]
    native: Native
    # Unused to run, yet checked as before the split: a variant of a docker profile may keep it.
    docker: Docker | None = None

    @model_validator(mode="before")
    @classmethod
    def _has_its_section(cls, data):
        if isinstance(data, dict) and data.get("native") is None:
            raise ValueError("runtime native needs a native section")
        return data

    def _section_checks(self) -> None:
        if self.docker:
            _check_docker(self, self.docker)

    @model_validator(mode="after")
    def _no_pod(self):
        if self.kubernetes:
            raise ValueError("kubernetes needs runtime docker (the pod runs the seat's image)")
        return self


Profile = Annotated[DockerProfile | NativeProfile, Field(discriminator="runtime")]
RUNTIMES: dict[str, type[DockerProfile] | type[NativeProfile]] = {
    "docker": DockerProfile,
    "native": NativeProfile,
}


class Runtime(BaseModel):
    """The tag alone, checked before its variant: every other error is then named by its place in
    the file (pydantic's tagged union would put the tag before each, as in docker.server.port)."""

    model_config = ConfigDict(strict=True)
    runtime: Literal["docker", "native"]


def parse(data: dict) -> Profile:
    """A profile from its fields (pydantic's ValidationError when they are not one)."""
    return RUNTIMES[Runtime.model_validate(data).runtime].model_validate(data)


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
    fields = {**data, "source": str(path), "sha256": digest, "extended": tuple(map(str, files[:-1]))}
    hint = "fix the fields named above; profiles/ holds working examples"
    runtime = validate(Runtime, fields, path, "profile", hint, via).runtime
    return validate(RUNTIMES[runtime], fields, path, "profile", hint, via)
