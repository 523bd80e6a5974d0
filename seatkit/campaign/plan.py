"""`seat campaign plan`: the visits in ABBA order, how many reboots, roughly how long, and every
reason to refuse, before anything changes.

Each visit of a host arm is its own one-shot boot, so repeats measure the boot-to-boot spread; one
more reboot at the end returns the host to its normal entry. Seat and live arms run in the boot the
campaign starts in, with no reboot.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from seatkit.bench import workload
from seatkit.campaign import boot, trust
from seatkit.campaign import spec as specs
from seatkit.campaign.spec import Arm, Campaign
from seatkit.errors import SeatError
from seatkit.host import cmdline, detect
from seatkit.host import plan as host_plan
from seatkit.host.journal import Journal
from seatkit.host.system import System
from seatkit.seat import host_profiles, profiles
from seatkit.serve import spec as serve_spec

LOADER_ENV = re.compile(r"PATH|LD_.*|PYTHON.*")  # what root's unit would resolve tools and load code by
MS_PER_TOKEN = 25.0  # a rough decode cost for the time estimate (the paper's seat: ~21 ms per step)


@dataclass
class Plan:
    campaign: Campaign
    visits: list[Arm]
    reboots: int
    seconds: float
    cold_start_s: float
    requests: int
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    launch_env: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "campaign": self.campaign.name,
            "visits": [a.name for a in self.visits],
            "reboots": self.reboots,
            "estimate_s": round(self.seconds),
            "cold_start_max_s": self.cold_start_s,
            "requests_per_bench": self.requests,
            "refusals": self.refusals,
            "notes": self.notes,
            "launch_env": self.launch_env,
        }


def abba(arms: list[Arm], repeats: int) -> list[Arm]:
    """A B C, C B A, A B C ...: a linear drift adds the same to every arm's mean over each pair."""
    return [a for r in range(repeats) for a in (arms if r % 2 == 0 else arms[::-1])]


def host_profile(campaign: Campaign) -> host_profiles.HostProfile | None:
    return host_profiles.load(campaign.host) if campaign.host else None


def build(campaign: Campaign, system: System | None = None, acknowledge_iommu_off: bool = False) -> Plan:
    system = system or System()
    arms = specs.all_arms(campaign)
    visits = abba(arms, campaign.repeats)
    hosts = [v for v in visits if v.kind == "host"]
    reboots = len(hosts) + (1 if hosts else 0)
    seat = profiles.load(campaign.seat)
    cold = float(seat.server.health_timeout_s)
    prompts = workload.suites(list(campaign.suites), campaign.bench.max_tokens)
    requests = len(prompts) * (campaign.bench.warmups + campaign.bench.repeats)
    tokens = sum(p.max_tokens for p in prompts) * (campaign.bench.warmups + campaign.bench.repeats)
    bench_s = tokens * MS_PER_TOKEN / 1000
    # A warm start is a fraction of the allowed cold start; a tenth is the estimate, the whole the bound.
    per_visit = bench_s + cold / 10
    seconds = len(visits) * per_visit + reboots * campaign.boot_s
    plan = Plan(campaign, visits, reboots, seconds, cold, requests)
    note = plan.notes.append
    profile = host_profile(campaign)
    if hosts:
        assert profile is not None  # host arms need campaign.host (Campaign)
        _judge_host(plan, system, profile, hosts, acknowledge_iommu_off)
    for arm in arms:
        if arm.profile:  # a seat arm
            profiles.load(arm.profile)  # refused now, not hours in
    found = launch_env(campaign)
    plan.launch_env = {k: v for k, v in found.items() if not LOADER_ENV.fullmatch(k)}
    if hosts:
        _judge_home(plan)
    dropped = " ".join(k for k in found if LOADER_ENV.fullmatch(k))
    if dropped:
        note(f"not carried to the visits (root would find its tools or load code by them): {dropped}")
    note(
        "the seat's launch knobs set now reach every visit: "
        + " ".join(f"{k}={v}" for k, v in plan.launch_env.items())
        if plan.launch_env
        else "no launch knob is set now: every visit's seat runs with its profile's defaults"
    )
    return plan


def _judge_host(
    plan: Plan, system: System, profile: host_profiles.HostProfile, hosts: list[Arm], ack: bool
) -> None:
    """Every reason to refuse the host arms on this host, and what to know about them."""
    refuse, note = plan.refusals.append, plan.notes.append
    if system.euid != 0:
        refuse("host arms change the boot configuration: run it as root (sudo)")
    facts = detect.facts(system)
    _judge_arms(plan, profile, facts, hosts, ack)
    if facts.stack != "grub":
        refuse(
            f"one-shot boots are automated for GRUB (grub-reboot) only; this host boots with "
            f"{facts.stack or 'an unknown loader'}: give each arm its own `seat host apply` "
            "and reboot by hand (that path changes the default boot while it runs)"
        )
    stuck = boot.one_shot_refusal(system) if facts.stack == "grub" else None
    if stuck:
        refuse(f"{stuck}; put /boot on a plain partition (ext4, vfat) to run host arms unattended")
    if facts.vendor is None:
        refuse("CPU vendor not recognised in /proc/cpuinfo: the IOMMU tokens depend on it")
    if facts.container:
        refuse(
            f"this runs in a container ({facts.container}): the boot files here are not the ones "
            "the host's kernel boots from; run the campaign on the host itself"
        )
    elif facts.virt:
        note(f"this is a virtual machine ({facts.virt}): host settings may not take")
    _judge_line(plan, system, profile, facts, hosts)
    applied = [t.txid for t in Journal(system).active()]
    if applied:
        note(
            f"`seat host apply` transactions are in force ({', '.join(applied)}): an arm that leaves "
            "one of their settings out will find it live and be skipped as not in force; "
            "`seat host rollback` them first"
        )
    note(
        f"{len(hosts)} one-shot boots and 1 back to the normal entry; the normal boot entry is "
        "never changed, and a hung arm falls back to it at the next power cycle"
    )


def _judge_arms(
    plan: Plan, profile: host_profiles.HostProfile, facts: detect.Facts, hosts: list[Arm], ack: bool
) -> None:
    """Every arm is a host plan: `seat host plan`'s driver rules for the P2P keys, and its refusals
    and warnings for turning the IOMMU off, for the arms that carry them."""
    settings: set[str] = {s for a in hosts for s in a.host or []}
    judged = host_plan.Plan(profile.name, facts)
    if "p2p" in settings:
        host_plan.judge_driver(judged, profile, host_profiles.registry_keys())
    if "iommu" in settings:
        host_plan.judge_iommu(judged, profile, host_plan.Choices(acknowledge_iommu_off=ack))
    plan.refusals += [f"host arms with {_with(settings)}: {r}" for r in judged.refusals]
    plan.notes += [f"warning: {w}" for w in judged.warnings]


def _judge_home(plan: Plan) -> None:
    """SEAT_HOME reaches the root unit: root launches the runtime built there, so it must be root's alone."""
    if "SEAT_HOME" not in plan.launch_env:
        return
    home = Path(plan.launch_env["SEAT_HOME"])
    unsafe = trust.owned_by_root_alone(Path("/"), [home], [home] if home.is_dir() else [])
    if unsafe:
        plan.refusals.append(
            f"SEAT_HOME={home} would reach the root unit, but a user can change what root runs "
            f"from it ({unsafe[0]}{' and more' if len(unsafe) > 1 else ''}): unset SEAT_HOME, or "
            "build the runtime where only root can write"
        )


def _judge_line(
    plan: Plan, system: System, profile: host_profiles.HostProfile, facts: detect.Facts, hosts: list[Arm]
) -> None:
    """An arm's line the kernel would cut drops its marker (the last token): refused."""
    line = (system.read("/proc/cmdline") or "").strip()
    for arm in {a.name: a for a in hosts}.values():
        tokens = boot.arm_tokens(
            arm, profile, facts.vendor or "intel", boot.operator_keys(system, ["linux x " + line])
        )
        size = len(line) + sum(len(t) + 3 for t in tokens)  # a bound: replaced tokens counted twice
        if size > cmdline.COMMAND_LINE_MAX:
            plan.refusals.append(
                f"the arm {arm.name}'s kernel command line would be about {size} bytes; the kernel keeps "
                f"{cmdline.COMMAND_LINE_MAX} and would drop the arm's marker, so its boot could not be told "
                "apart: shorten the normal command line (GRUB_CMDLINE_LINUX_DEFAULT)"
            )


def require_arm(system: System, campaign: Campaign, arm: Arm) -> None:
    """Before an arm is booted: `seat host plan`'s driver rules against the driver the next boot
    loads now (an upgrade since the start is judged too)."""
    profile = host_profile(campaign)
    if profile is None or "p2p" not in (arm.host or []):
        return
    judged = host_plan.Plan(profile.name, detect.facts(system))
    host_plan.judge_driver(judged, profile, host_profiles.registry_keys())
    if judged.refusals:
        raise SeatError(
            f"the arm {arm.name} is not booted: " + "; ".join(judged.refusals),
            "the campaign stops and the host is put back; plan it again (`seat campaign plan`)",
        )


def _with(settings: set[str]) -> str:
    return ", ".join(specs.LABELS[s] for s in specs.SETTINGS if s in settings)


def launch_env(campaign: Campaign) -> dict[str, str]:
    """The launch knobs of the campaign's seats set in this environment, and the names the shell
    passes them (the unit's runs get these too: systemd starts it with none of the operator's
    environment)."""
    names = {campaign.seat} | {a.profile for a in specs.all_arms(campaign) if a.profile}
    knobs = set()
    for name in names:
        spec = serve_spec.build(profiles.load(name))
        knobs |= {k.name for k in spec.knobs} | set(spec.pass_env)
    return {k: os.environ[k] for k in sorted(knobs) if k in os.environ}


def duration(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else f"{rest // 60} min {rest % 60:02d} s"


def require(plan: Plan) -> None:
    if plan.refusals:
        raise SeatError(
            "refused:\n  - " + "\n  - ".join(plan.refusals),
            "`seat campaign plan` shows the visits, the reboots and why it is refused",
        )
