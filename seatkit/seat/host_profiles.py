"""Host profiles (host/*.yaml) and the registry-key rules by driver branch (host/registry-keys.yaml)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from seatkit import paths, safe_yaml
from seatkit.errors import SeatError
from seatkit.validation import validate

HOST = paths.REPO / "host"
# A kernel parameter (or module option) the kit may write: a name, optionally `=value`, with
# nothing a shell, GRUB or the kernel's quoting would read differently.
PARAMETER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(=[A-Za-z0-9_.,:;=/+%@-]*)?")
# On the kernel line grub.cfg's script reads an unquoted `;` as the end of the `linux` command:
# `;` is for module options (registry dwords) only.
KERNEL_PARAMETER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(=[A-Za-z0-9_.,:=/+%@-]*)?")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Iommu(Strict):
    mode: Literal["off", "passthrough"]
    tokens: dict[Literal["amd", "intel"], list[str]]
    acknowledge: str = ""

    @field_validator("tokens")
    @classmethod
    def _kernel_parameters(cls, tokens):  # they land in boot configuration read by shells and GRUB
        for token in (t for group in tokens.values() for t in group):
            if not KERNEL_PARAMETER.fullmatch(token):
                raise ValueError(
                    f"{token!r} is not a plain kernel parameter (name[=value] of letters, "
                    "digits and _ . , : = / + % @ -)"
                )
        return tokens


class Rebar(Strict):
    min_bar1_fraction_of_vram: float = Field(gt=0, le=1)


class HostProfile(Strict):
    name: str
    description: str
    iommu: Iommu
    registry: Literal["five-key", "three-key"]
    rebar: Rebar
    hmm_disabled: bool
    sources: list[str] = Field(min_length=1)


class Form(Strict):
    dwords: str
    sources: list[str]

    @field_validator("dwords")
    @classmethod
    def _module_option(cls, dwords):  # written as NVreg_RegistryDwords="..." into modprobe.d
        if not PARAMETER.fullmatch(f"NVreg_RegistryDwords={dwords}"):
            raise ValueError(f"{dwords!r} is not a plain module option value")
        return dwords


class Rule(Strict):
    drivers: dict[Literal["from", "below"], str]
    refuse: list[str]
    why: str


class RegistryKeys(Strict):
    forms: dict[str, Form]
    rules: list[Rule]


def _yaml(path: Path) -> dict:
    try:
        data = safe_yaml.read(path, "host profile")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        known = ", ".join(p.stem for p in sorted(HOST.glob("*.yaml")) if p.stem != "registry-keys")
        raise SeatError(f"no host profile at {path}", f"host profiles: {known}", code=2) from None
    if not isinstance(data, dict):
        raise SeatError(f"{path}: expected a mapping of fields", code=2)
    return data


def load(name: str) -> HostProfile:
    path = Path(name) if name.endswith(".yaml") else HOST / f"{name}.yaml"
    return validate(
        HostProfile,
        {**_yaml(path), "name": path.stem},
        path,
        "host profile",
        "host/paper.yaml and host/conservative.yaml are working examples",
    )


def registry_keys() -> RegistryKeys:
    path = HOST / "registry-keys.yaml"
    return validate(RegistryKeys, _yaml(path), path, "registry-key rules", "see host/registry-keys.yaml")


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def rule_for(driver: str, keys: RegistryKeys) -> Rule | None:
    v = version_tuple(driver)
    for rule in keys.rules:
        low, high = rule.drivers.get("from"), rule.drivers.get("below")
        if (low is None or v >= version_tuple(low)) and (high is None or v < version_tuple(high)):
            return rule
    return None


def parse_dwords(text: str) -> dict[str, str]:
    """`A=1;B=0x11` -> {"A": "1", "B": "0x11"} (blank entries ignored)."""
    out = {}
    for item in text.strip().strip('"').split(";"):
        if "=" in item:
            key, value = item.split("=", 1)
            out[key.strip()] = value.strip()
    return out
