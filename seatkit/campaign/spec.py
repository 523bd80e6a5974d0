"""A campaign as data: campaigns/NAME.yaml names the seat, the suites, the repeats and the arms.

Host arms are subsets of one host profile's settings (each costs a one-shot boot); profile arms are
seat variants and live arms knobs set without a reboot (both run in the boot the campaign starts in).
A design keyword generates the host arms from the listed settings.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from seatkit import paths, safe_yaml
from seatkit.errors import SeatError
from seatkit.validation import validate

CAMPAIGNS = paths.REPO / "campaigns"
SETTINGS = ("iommu", "p2p", "hmm")  # what a host arm can hold: each reaches the kernel's command line
LABELS = {"iommu": "IOMMU off", "p2p": "the P2P keys", "hmm": "HMM off"}
NAME = r"^[a-z0-9][a-z0-9_.+-]{0,40}$"


Setting = Literal["iommu", "p2p", "hmm"]  # what a host arm turns on


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Arm(Strict):
    name: str = Field(pattern=NAME)
    host: list[Setting] | None = None
    profile: str | None = Field(default=None, pattern=NAME)
    live: dict[Literal["gpu_power_limit_w", "cpu_boost"], int | bool] | None = None

    @field_validator("live")
    @classmethod
    def _knob_kinds(cls, live):  # `true` is an int to Python: 1 W would reach nvidia-smi -pl
        for knob, value in (live or {}).items():
            if knob == "cpu_boost" and not isinstance(value, bool):
                raise ValueError(f"cpu_boost is true or false, not {value!r}")
            if knob == "gpu_power_limit_w" and (isinstance(value, bool) or value < 1):
                raise ValueError(f"gpu_power_limit_w is a whole number of watts, 1 or more, not {value!r}")
        return live

    @model_validator(mode="after")
    def _one_kind(self):
        if sum(x is not None for x in (self.host, self.profile, self.live)) != 1:
            raise ValueError(f"arm {self.name}: give exactly one of host, profile or live")
        return self

    @property
    def kind(self) -> str:
        return "host" if self.host is not None else "profile" if self.profile else "live"


class Bench(Strict):
    warmups: int = Field(default=1, ge=0, le=20)
    repeats: int = Field(default=5, ge=1, le=100)
    max_tokens: int | None = Field(default=None, ge=2)


class Campaign(Strict):
    name: str = Field(pattern=NAME)  # the file's stem: it lands in grub.cfg and in folder names
    description: str
    seat: str = Field(pattern=NAME)
    host: str | None = Field(default=None, pattern=NAME)
    suites: list[str] = Field(min_length=1)
    repeats: int = Field(default=2, ge=1, le=20, description="benches of each arm, ABBA-interleaved")
    bench: Bench = Bench()
    design: Literal["factorial", "leave-one-out", "one-at-a-time"] | None = None
    settings: list[Setting] = []
    arms: list[Arm] = []
    boot_s: int = Field(default=180, ge=10, description="a reboot, firmware to login, for the estimate")
    boot_attempts: int = Field(default=2, ge=1, le=5, description="boots an arm may take before it fails")

    @model_validator(mode="after")
    def _coherent(self):
        if self.design and not self.settings:
            raise ValueError("a design needs the settings it varies (settings: [iommu, p2p, hmm])")
        if self.settings and not self.design:
            raise ValueError(
                "settings without a design: give design: factorial, leave-one-out or one-at-a-time"
            )
        if len(set(self.settings)) != len(self.settings):
            raise ValueError("settings lists one twice")
        arms = all_arms(self)
        if not arms:
            raise ValueError("no arms: give arms, or a design and its settings")
        names = [a.name for a in arms]
        if len(set(names)) != len(names):
            raise ValueError(f"two arms share a name: {names}")
        if any(a.kind == "host" for a in arms) and not self.host:
            raise ValueError("host arms need the host profile whose settings they take (host: paper)")
        if len({a.kind for a in arms}) > 1 and any(a.kind == "host" for a in arms):
            raise ValueError(
                "host arms and seat or live arms in one campaign: give them campaigns of "
                "their own (an effect is measured within one kind)"
            )
        return self


def arm_name(subset: tuple[str, ...]) -> str:
    return "+".join(subset) if subset else "none"


def designed(design: str | None, settings: list[Setting]) -> list[Arm]:
    """The host arms a design keyword gives, the reference arm first."""
    if not design:
        return []
    if design == "factorial":
        subsets = [s for n in range(len(settings) + 1) for s in itertools.combinations(settings, n)]
    elif design == "leave-one-out":
        subsets = [tuple(settings)] + [tuple(x for x in settings if x != s) for s in settings]
    else:  # one-at-a-time
        subsets = [()] + [(s,) for s in settings]
    return [Arm(name=arm_name(s), host=list(s)) for s in subsets]


def all_arms(campaign: Campaign) -> list[Arm]:
    return designed(campaign.design, list(campaign.settings)) + list(campaign.arms)


def load(name: str) -> Campaign:
    path = Path(name) if name.endswith((".yaml", ".yml")) else CAMPAIGNS / f"{name}.yaml"
    try:  # the kit's defensive reader: no alias bombs, no duplicate keys, no FIFO to hang on
        data = safe_yaml.read(path, "campaign")
    except (FileNotFoundError, IsADirectoryError):
        known = ", ".join(p.stem for p in sorted(CAMPAIGNS.glob("*.yaml")))
        raise SeatError(f"no campaign at {path}", f"campaigns: {known or '(none)'}") from None
    if not isinstance(data, dict):
        raise SeatError(f"{path}: expected a mapping of fields")
    return validate(
        Campaign, {**data, "name": path.stem}, path, "campaign", "campaigns/paper.yaml is a working example"
    )
