"""`seat campaign plan`: the visits in ABBA order, how many reboots, roughly how long, and every
reason to refuse, before anything changes.

Each visit of a host arm is its own one-shot boot, so repeats measure the boot-to-boot spread; one
more reboot at the end returns the host to its normal entry. Seat and live arms run in the boot the
campaign starts in, with no reboot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from seatkit.bench import workload
from seatkit.campaign import spec as specs
from seatkit.campaign.spec import Arm, Campaign
from seatkit.errors import SeatError
from seatkit.host import detect
from seatkit.host.journal import Journal
from seatkit.host.system import System
from seatkit.seat import host_profiles, profiles

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
    refuse, note = plan.refusals.append, plan.notes.append
    profile = host_profile(campaign)
    if hosts:
        assert profile is not None  # host arms need campaign.host (Campaign)
        if (
            profile.iommu.mode == "off"
            and any("iommu" in (a.host or []) for a in hosts)
            and not acknowledge_iommu_off
        ):
            refuse(
                "host arms turn the IOMMU off, which needs --acknowledge-iommu-off. "
                + " ".join(profile.iommu.acknowledge.split())
            )
        if system.euid != 0:
            refuse("host arms change the boot configuration: run it as root (sudo)")
        facts = detect.facts(system)
        if facts.stack != "grub":
            refuse(
                f"one-shot boots are automated for GRUB (grub-reboot) only; this host boots with "
                f"{facts.stack or 'an unknown loader'}: give each arm its own `seat host apply` "
                "and reboot by hand (that path changes the default boot while it runs)"
            )
        if facts.vendor is None:
            refuse("CPU vendor not recognised in /proc/cpuinfo: the IOMMU tokens depend on it")
        if facts.virt:
            note(f"this is a virtual machine or container ({facts.virt}): host settings may not take")
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
    for arm in arms:
        if arm.profile:  # a seat arm
            profiles.load(arm.profile)  # refused now, not hours in
    return plan


def duration(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else f"{rest // 60} min {rest % 60:02d} s"


def require(plan: Plan) -> None:
    if plan.refusals:
        raise SeatError(
            "refused:\n  - " + "\n  - ".join(plan.refusals),
            "`seat campaign plan` shows the visits, the reboots and why it is refused",
        )
