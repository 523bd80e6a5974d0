"""A fake host for campaigns: GRUB's one-shot boot simulated, and a ground-truth oracle seat.

A reboot is the harness booting what GRUB would: grubenv's next_entry once (then cleared, as
grub.cfg's `save_env next_entry` does), else the first entry. The entry's `linux` line becomes
/proc/cmdline, and its `module.param=value` tokens reach the module parameters over modprobe.d, as
the kernel and modprobe do; then the unit's ExecStart runs (when the unit is enabled).

OracleDriver is a TEST ORACLE, labelled as such: seatkit's ground-truth streaming server
(seatkit.bench.oracle), started per arm with a step time computed from the fake host's live state
(IOMMU off -40 %, P2P keys -5 %, HMM 0, plus seeded noise) and constant tokens/step, benched by the
real bench. FastDriver writes a run folder at once, for the kill loop (no timing is measured there).
"""

from __future__ import annotations

import errno
import random
import re
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

import yaml
from fake_host import KVER, Death, FakeHost

from seatkit.bench import run as bench_run
from seatkit.bench import selftest, workload
from seatkit.bench.target import Options, Target
from seatkit.campaign import boot, runner
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign import spec as specs
from seatkit.campaign.folder import Log, current
from seatkit.errors import SeatError
from seatkit.host import modprobe, state
from seatkit.host.journal import Journal
from seatkit.host.system import System
from seatkit.seat import host_profiles

ENV_SIZE = 1024
SEAT = "/usr/local/bin/seat"
EFFECTS = {"iommu": -0.40, "p2p": -0.05, "hmm": 0.0}
BASE_MS = 20.0
TOKENS_PER_STEP = 3.0


def grubenv(values: dict[str, str]) -> bytes:
    """grub-editenv's block: a header, name=value lines, '#' padding to 1024 bytes."""
    body = "# GRUB Environment Block\n" + "".join(f"{k}={v}\n" for k, v in values.items())
    return (body + "#" * (ENV_SIZE - len(body))).encode()


def read_env(data: bytes | None) -> dict[str, str]:
    lines = (data or b"").decode().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


class CampaignHost(FakeHost):
    def __init__(self, root: Path, *, ignore: tuple[str, ...] = (), **kw):
        self.ignore = set(
            ignore
        )  # command-line module options this fake modprobe drops: a setting that does not take
        self.reboots_requested = 0
        super().__init__(root, "grub", **kw)
        for folder in ("/etc/grub.d", "/etc/systemd/system"):
            self.path(folder).mkdir(parents=True, exist_ok=True)
        self.path("/boot/grub/grubenv").write_bytes(grubenv({}))
        self.write(
            "/proc/self/mounts", "/dev/nvme0n1p2 / ext4 rw 0 0\n/dev/nvme0n1p1 /boot/efi vfat rw 0 0\n"
        )
        self.write(SEAT, "#!/bin/sh\n")  # the kit's root-owned install: what the unit runs
        self.path(SEAT).chmod(0o755)
        self.boot()  # the pristine host, booted as every later boot is

    def files(self) -> dict[str, str]:
        """The tree, less the boot id (new at every boot)."""
        return {k: v for k, v in self.tree().items() if k != "proc/sys/kernel/random/boot_id"}

    def run(self, argv: list[str]) -> tuple[int, str]:
        name = argv[0]
        if name in ("grub-reboot", "grub-editenv", "systemctl"):
            self.calls.append(list(argv))
            if name in self.failing:
                return 1, f"{name}: simulated failure\n"
        if name == "grub-reboot":
            env = read_env(self.path("/boot/grub/grubenv").read_bytes())
            env["next_entry"] = argv[1]
            self.path("/boot/grub/grubenv").write_bytes(grubenv(env))
            return 0, ""
        if name == "grub-editenv" and argv[2] in ("set", "unset"):
            env = read_env(self.path(argv[1]).read_bytes())
            for word in argv[3:]:
                if argv[2] == "set":
                    env[word.split("=", 1)[0]] = word.split("=", 1)[1]
                else:
                    env.pop(word, None)
            self.path(argv[1]).write_bytes(grubenv(env))
            return 0, ""
        if name == "systemctl":
            if argv[1] == "reboot":
                self.reboots_requested += 1
            return 0, ""
        return super().run(argv)

    def update_grub(self) -> tuple[int, str]:
        """The fake update-grub, plus what each executable /etc/grub.d/4x script prints (as 41_custom would)."""
        rc, output = super().update_grub()
        if rc == 0:
            extra = ""
            for script in sorted(self.path("/etc/grub.d").glob("4*")):
                if script.stat().st_mode & 0o111:
                    extra += subprocess.run(
                        ["sh", str(script)], capture_output=True, text=True, check=True
                    ).stdout
            cfg = self.path("/boot/grub/grub.cfg")
            cfg.write_text(cfg.read_text() + extra)
        return rc, output

    # --- the boot ----------------------------------------------------------------------------
    def entries(self) -> list[tuple[str | None, str]]:
        """(id, linux arguments) of each menu entry in grub.cfg, in order."""
        out, ident = [], None
        for line in self.read("/boot/grub/grub.cfg").splitlines():
            if line.startswith("menuentry"):
                found = re.search(r"--id\s+(\S+)", line)
                ident = found.group(1) if found else None
            elif line.strip().startswith("linux"):
                out.append((ident, line.strip().split(None, 2)[2]))
        return out

    def boot(self) -> str | None:
        """What GRUB boots now; returns the entry's id (None: the default)."""
        env = read_env(self.path("/boot/grub/grubenv").read_bytes())
        wanted = env.get("next_entry") or None
        if "next_entry" in env:  # grub.cfg: set next_entry=; save_env next_entry
            env["next_entry"] = ""
            self.path("/boot/grub/grubenv").write_bytes(grubenv(env))
        entries = self.entries()
        ident, args = next(((i, a) for i, a in entries if wanted and i == wanted), entries[0])
        tokens = shlex.split(args)  # GRUB's quoting, as far as these lines use it
        self.write("/proc/cmdline", f"BOOT_IMAGE=/vmlinuz-{KVER} {' '.join(tokens)}\n")
        self.write("/proc/sys/kernel/random/boot_id", f"{uuid.uuid4()}\n")
        system = System(root=self.root)
        options = {m: modprobe.options(system, m)[0] for m in ("nvidia", "nvidia_uvm")}
        for token in tokens:  # the kernel hands module.param=value to the module, over modprobe.d
            name = token.split("=", 1)[0]
            if "." in name and name.split(".")[0] in options and name not in self.ignore:
                options[name.split(".")[0]][name.split(".", 1)[1]] = token.split("=", 1)[1]
        dwords = options["nvidia"].get("NVreg_RegistryDwords", "").strip('"')
        self.write(
            "/proc/driver/nvidia/params",
            f'EnableResizableBar: {int("EnableResizableBar=1" in dwords)}\nRegistryDwords: "{dwords}"\n',
        )
        self.write(
            "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm",
            "Y\n" if options["nvidia_uvm"].get("uvm_disable_hmm") == "1" else "N\n",
        )
        units = self.path("/sys/class/iommu/ivhd0")
        if "iommu=off" in tokens:
            if units.exists():
                units.rmdir()
        else:
            units.mkdir(parents=True, exist_ok=True)
        return ident

    def unit_enabled(self) -> bool:
        wants = self.path(boot.WANTS)
        return wants.exists() and f"Wants={boot.UNIT_NAME}" in wants.read_text()

    def exec_start(self) -> list[str]:
        unit = self.read(boot.UNIT)
        return shlex.split(next(x for x in unit.splitlines() if x.startswith("ExecStart=")).split("=", 1)[1])

    def run_unit(self, driver) -> str | None:
        """systemd at boot: the enabled unit's ExecStart, which must be `seat campaign step --root R`;
        it is run in this process with the test's seat driver. When it fails, its OnFailure= unit
        runs as systemd would run it: its condition on the command line, then its commands."""
        if not self.unit_enabled():
            return None
        argv = self.exec_start()
        assert argv[1:] == ["campaign", "step", "--root", str(self.root)], argv
        try:
            return runner.step(self.system, driver)
        except Exception:
            self.on_failure()
            raise

    def on_failure_units(self) -> list[list[str]]:
        """The lines of each unit the unit's OnFailure= names (a missing one: systemd logs it)."""
        names = [
            n for x in self.read(boot.UNIT).splitlines() if x.startswith("OnFailure=") for n in x[10:].split()
        ]
        units = [self.path(f"/etc/systemd/system/{name}") for name in names]
        return [unit.read_text().splitlines() for unit in units if unit.is_file()]

    def on_failure(self) -> None:
        """systemd's OnFailure=: each unit it names, its condition on the command line, then its commands."""
        cmdline = [t.split("=", 1)[0] for t in self.read("/proc/cmdline").split()]
        for lines in self.on_failure_units():
            key = next(
                (x.split("=", 1)[1] for x in lines if x.startswith("ConditionKernelCommandLine=")), None
            )
            if key is not None and key not in cmdline:
                continue
            for line in (x for x in lines if x.startswith("ExecStart=")):
                argv = shlex.split(line.split("=", 1)[1].lstrip("-"))
                self.run([Path(argv[0]).name, *argv[1:]])

    def live_factor(self) -> float:
        """The oracle's truth: the fraction of base step time this host's live state gives."""
        system = System(root=self.root)
        factor = 1.0
        if "iommu=off" in (system.read("/proc/cmdline") or "").split() and not system.entries(
            "/sys/class/iommu"
        ):
            factor *= 1 + EFFECTS["iommu"]
        form = host_profiles.registry_keys().forms[host_profiles.load("paper").registry].dwords
        keys = {k: v for k, v in host_profiles.parse_dwords(form).items() if k != "EnableResizableBar"}
        if keys.items() <= (state.live_dwords(system).value or {}).items():
            factor *= 1 + EFFECTS["p2p"]
        if state.live_hmm_disabled(system).value:
            factor *= 1 + EFFECTS["hmm"]
        return factor


def drive(host: CampaignHost, driver, limit: int = 200) -> list[str]:
    """Run the unit and boot, as the host would, until the campaign has ended (and the host has
    rebooted into its normal entry, when the end asked for it)."""
    outcomes = []
    for n in range(limit):
        before = host.reboots_requested
        first = n == 0 and not host.unit_enabled()  # `seat campaign run` makes the first step itself
        outcomes.append(runner.step(host.system, driver) if first else host.run_unit(driver))
        if host.reboots_requested > before:
            host.boot()
        if outcomes[-1] in ("done", "aborted", "failed", None):
            return outcomes
    raise AssertionError(f"no end after {limit} boots: {outcomes[-5:]}")


class OracleDriver:
    """TEST ORACLE seat: the ground-truth server with a step time set by the host's live state."""

    def __init__(self, host: CampaignHost, seed: int = 0, noise: float = 0.01, max_tokens: int = 31):
        self.host, self.random, self.noise, self.max_tokens = host, random.Random(seed), noise, max_tokens
        self.truths: list[float] = []

    def bench(self, campaign, arm, runs: Path, progress) -> Path:
        step_ms = BASE_MS * self.host.live_factor() * (1 + self.random.gauss(0, self.noise))
        self.truths.append(step_ms)
        proc, url = selftest.start_oracle(TOKENS_PER_STEP, step_ms)
        try:
            out = bench_run.RunDir(runs, arm.name)
            prompts = workload.suites(list(campaign.suites), self.max_tokens)[:1]
            bench_run.bench(
                Target(url, "oracle", k=7),
                prompts,
                Options(campaign.bench.warmups, campaign.bench.repeats),
                out,
            )
            return out.path
        finally:
            proc.kill()
            proc.wait()

    def stop(self, campaign) -> list[str]:
        return []  # each bench stops its oracle itself


class FastDriver:
    """A bench that writes its run folder at once (kill loop only): a kill point inside it."""

    def __init__(self, host: CampaignHost):
        self.host = host

    def bench(self, campaign, arm, runs: Path, progress) -> Path:
        out = bench_run.RunDir(runs, arm.name)
        out.add({"partial": True})
        self.host.system.fault("campaign: inside the bench")
        ms = BASE_MS * self.host.live_factor()
        summary = {"suites": {"code": {"ms_per_step": {"median": ms}, "tokens_per_step": {"median": 3.0}}}}
        out.finish(summary, "fast\n")
        return out.path

    def stop(self, campaign) -> list[str]:
        return []


def write_campaign(tmp_path, **fields):
    data = {
        "description": "test",
        "seat": "cpu-smoke",
        "host": "paper",
        "suites": ["code"],
        "repeats": 1,
        "bench": {"warmups": 0, "repeats": 1},
        **fields,
    }
    path = tmp_path / "camp.yaml"
    path.write_text(yaml.safe_dump(data))
    return specs.load(str(path))


def start(host, campaign):
    plan = campaign_plan.build(campaign, host.system, acknowledge_iommu_off=True)
    return runner.start(plan, host.system, SEAT, str(host.root))


def refusal(host, campaign) -> str:
    """What `seat campaign run` says when it refuses to start; empty when it starts."""
    try:
        start(host, campaign)
    except SeatError as exc:
        return exc.message
    return ""


def installed_unit(host, campaign) -> str:
    """The unit the campaign's first step writes, as systemd will read it."""
    start(host, campaign)
    runner.step(host.system, FastDriver(host))
    return host.read(boot.UNIT)


# --- the fault loop: failures that are not kills, in an arm's boot -------------------------------


class GpuIsLost(Exception):
    """What NVML raises when a GPU falls off the bus (pynvml's NVMLError_GpuIsLost): neither a
    SeatError nor an OSError."""


FAULTS = ("gpu lost", "/var read-only", "folder gone", "update-grub failing", "unit edited")


class Faulter:
    """system.fault: at the `at`-th point passed in an arm's boot, the fault of its kind happens.
    /var read-only lasts until the next boot (Journal, System.write and the log refuse there)."""

    def __init__(self, host: CampaignHost, kind: str, at: int):
        self.host, self.kind, self.at, self.seen, self.fired = host, kind, at, 0, None

    def __call__(self, point: str) -> None:
        if self.fired or boot.booted_arm(self.host.system) is None:
            return
        self.seen += 1
        if self.seen < self.at:
            return
        self.fired = point
        host = self.host
        if self.kind == "gpu lost":
            raise GpuIsLost(f"Unable to determine the device handle for GPU0: GPU is lost ({point})")
        if self.kind == "/var read-only":
            host.system.read_only = True  # type: ignore[attr-defined]
            raise OSError(errno.EROFS, "Read-only file system")
        if self.kind == "folder gone":
            folder = current(host.system)
            if folder:
                shutil.rmtree(host.path(folder), ignore_errors=True)
        elif self.kind == "update-grub failing":  # the operator's syntax error
            host.write("/etc/default/grub", host.read("/etc/default/grub") + "if [ then\n")
        elif self.kind == "unit edited" and host.path(boot.UNIT).is_file():
            host.write(boot.UNIT, host.read(boot.UNIT) + "# the operator's edit\n")


def read_only_var(patch) -> None:
    """Make the /var of a System marked read_only refuse writes, as a read-only remount does.
    `patch(owner, name, value)` is pytest's monkeypatch.setattr, or setattr for a script."""

    def refuse(system, path: str) -> None:
        if getattr(system, "read_only", False) and path.startswith("/var/"):
            raise OSError(errno.EROFS, f"Read-only file system: {path}")

    journal_append, system_write, log_call = Journal._append, System.write, Log.__call__

    def append(self, record):
        refuse(self.system, self.file)
        journal_append(self, record)

    def write(self, path, data, mode=0o644):
        refuse(self, path)
        system_write(self, path, data, mode)

    def log(self, line):
        refuse(self.system, self.folder)
        log_call(self, line)

    patch(Journal, "_append", append)
    patch(System, "write", write)
    patch(Log, "__call__", log)


def fault_points(plan, tmp: Path) -> int:
    """How many fault points a whole campaign passes in its arms' boots."""
    host = CampaignHost(tmp)
    counter = Faulter(host, "count", 10**9)
    host.system.fault = counter
    runner.start(plan, host.system, SEAT, str(host.root))
    drive(host, FastDriver(host))
    return counter.seen


def faulted(plan, tmp: Path, kind: str, at: int) -> tuple[CampaignHost, str | None, str]:
    """One campaign with one fault; the host booted on, as it would, until the campaign has ended
    or nothing more would run. Returns the host, the fault point, and the campaign folder."""
    host = CampaignHost(tmp)
    faulter = Faulter(host, kind, at)
    host.system.fault = faulter
    folder = runner.start(plan, host.system, SEAT, str(host.root))
    driver = FastDriver(host)
    for n in range(40):
        before = host.reboots_requested
        try:
            if n == 0:
                runner.step(host.system, driver)
            elif host.unit_enabled() and current(host.system):
                host.run_unit(driver)
            else:
                break
        except Exception:  # the unit failed: its OnFailure= unit has run (run_unit)
            pass
        if host.reboots_requested > before:
            host.boot()
            host.system.read_only = False  # type: ignore[attr-defined]  # a fresh boot mounts /var again
        elif not host.unit_enabled():
            break
    return host, faulter.fired, folder


def left_in_an_arm(host: CampaignHost, folder: str) -> list[str]:
    """What a faulted campaign left wrong: not the normal entry, a one-shot armed, a transaction
    open, the campaign not ended, the kit's boot files left, no report."""
    problems = []
    if boot.booted_arm(host.system) is not None:
        problems.append(f"the host runs the arm {boot.booted_arm(host.system)}")
    if read_env(host.path("/boot/grub/grubenv").read_bytes()).get("next_entry"):
        problems.append("a one-shot entry is armed")
    if Journal(host.system).open():
        problems.append("a host transaction is open")
    if current(host.system) is not None:
        problems.append("the campaign has not ended")
    if host.unit_enabled() or host.path(boot.SCRIPT).exists():
        problems.append("the unit or the entries are still installed")
    from seatkit.campaign.folder import begun  # here: the harness also drives older kits

    if begun(host.system, folder) and not host.path(f"{folder}/report.json").is_file():
        problems.append("no report")
    return problems


# The kill sweep: a one-arm campaign killed at one point (a seeded one), then recovered in one of the
# operator's ways. CI kills once per recovery (tests/unit/test_campaign_runner.py); the full seeded
# count runs in tests/benchmarks/campaign_kills.py.
RECOVERIES = ("abort", "reboot", "resume")


class Killer:
    """Kills the campaign (a Death) at its at-th kill point; 0 counts the points and kills none."""

    def __init__(self, at: int):
        self.at, self.seen, self.points = at, 0, []

    def __call__(self, point: str) -> None:
        self.seen += 1
        self.points.append(point)
        if self.seen == self.at:
            raise Death(point)


def kill_plan(tmp: Path):
    """The one-arm campaign the kills run, and how many kill points a whole run of it passes."""
    campaign = write_campaign(tmp, description="kills", design="one-at-a-time", settings=["p2p"])
    template = CampaignHost(tmp / "count")
    counter = Killer(0)
    template.system.fault = counter
    plan = campaign_plan.build(campaign, template.system)  # every fake host is alike
    runner.start(plan, template.system, SEAT, str(template.root))
    drive(template, FastDriver(template))
    return plan, counter.seen


def killed_and_recovered(plan, tmp: Path, at: int, recovery: str) -> str:
    """Kill a run of plan at its at-th point, recover (abort; the power cut's reboot, then resume; or
    resume), and check the host byte-identical with nothing of the campaign left. Returns where the
    kill came."""
    host = CampaignHost(tmp)
    pristine = host.files()
    killer = Killer(at)
    host.system.fault = killer
    with host.write_loss() as disk:
        try:
            runner.start(plan, host.system, SEAT, str(host.root))
            drive(host, FastDriver(host))
        except Death as death:
            where = str(death)
        else:
            raise AssertionError(f"no kill at point {at}")
        if recovery == "reboot":  # the kill was a power cut: what was not synced is lost
            disk.power_cut()
    host.system.fault = lambda point: None
    if recovery == "reboot":  # GRUB boots what it would
        host.boot()
    try:
        if recovery == "abort":
            runner.abort(host.system, FastDriver(host))
            if host.reboots_requested:
                host.boot()
        else:
            drive(host, FastDriver(host))
    except SeatError as exc:  # killed after the end: nothing left to run
        assert "no campaign is running" in exc.message, exc.message
    assert current(host.system) is None and not host.unit_enabled(), (
        f"the campaign did not end (killed at {killer.points[-1]})"
    )
    if "seatkit.arm=" in host.read("/proc/cmdline"):
        host.boot()  # the operator's reboot after an abort from an arm's boot
    assert host.files() == pristine, (killer.points[-1], recovery)
    assert not Journal(host.system).open()
    return where
