"""What a newcomer reads on a machine without GPUs, as golden output at 80 and 120 columns.

The machine is a fake VM (root, no container signs, no boot configuration, no NVIDIA driver), so the
output is the same wherever the tests run. SEAT_REGEN_GOLDEN=1 rewrites the golden files; read the
diff before committing it.
"""

import io
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import BIN, REPO
from rich.console import Console

from seatkit.cli import app
from seatkit.cli.app import seat
from seatkit.doctor import diagnose
from seatkit.doctor import host as host_rows
from seatkit.host import detect
from seatkit.host import status as host_status
from seatkit.host.system import System
from seatkit.seat import host_profiles, profiles
from seatkit.serve import launch
from seatkit.serve.backends.native import process_start

GOLDEN = REPO / "tests" / "fixtures" / "golden"
# A Python literal in a cell reads as a bug: {}, [], None, True, False, ['x'].
LITERAL = re.compile(r"\{\}|\[\]|\['|\bNone\b|\bTrue\b|\bFalse\b")


def vm(root: Path, *, container: str = "", euid: int = 0) -> System:
    """A root tree of a VM without NVIDIA: cpuinfo, a boot id, a kernel command line, no boot files."""
    files = {
        "proc/cpuinfo": "vendor_id\t: AuthenticAMD\nflags\t\t: fpu hypervisor\n",
        "proc/sys/kernel/random/boot_id": "00000000-0000-4000-8000-000000000000\n",
        "proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro\n",
        "proc/1/cgroup": "0::/\n",
    }
    if container == "docker":
        files[".dockerenv"] = ""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)

    def runner(argv):
        if argv[:2] == ["systemd-detect-virt", "--container"]:
            return 1, "none\n"
        if argv[0] == "systemd-detect-virt":
            return 0, "kvm\n"
        return 127, f"{argv[0]}: not found"

    return System(root=root, runner=runner, euid=euid)


@pytest.fixture
def gpuless(tmp_path, monkeypatch):
    """doctor and host status on the fake VM, without a driver."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    system = vm(tmp_path / "root")
    real_status = host_status.status
    monkeypatch.setattr(
        diagnose.gpu_readings,
        "read",
        lambda: {"error": "no NVIDIA driver answers (NVML: NVML Shared Library Not Found)"},
    )
    monkeypatch.setattr(
        diagnose.host_status, "status", lambda profile, system_=None: real_status(profile, system)
    )
    monkeypatch.setattr(host_rows, "System", lambda: system)
    monkeypatch.setattr("seatkit.host.gpus.inventory", lambda system_=None: None)
    monkeypatch.chdir(tmp_path)


def run_at(columns: int, args: list[str], monkeypatch) -> str:
    monkeypatch.setattr(app.out, "width", columns)
    done = CliRunner().invoke(seat, args)
    assert "Traceback" not in done.output and done.exception is None or isinstance(done.exception, SystemExit)
    return "\n".join(line.rstrip() for line in done.output.splitlines()) + "\n"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("SEAT_REGEN_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed: SEAT_REGEN_GOLDEN=1 rewrites it; read the diff"


@pytest.mark.parametrize("columns", [80, 120])
def test_doctor_without_gpus(gpuless, monkeypatch, columns):
    text = run_at(columns, ["doctor", profiles.DEFAULT_PROFILE], monkeypatch)
    check_golden(f"doctor-no-gpus-{columns}.txt", text)
    assert max(map(len, text.splitlines())) <= columns
    assert not LITERAL.search(text), LITERAL.search(text)
    assert "DRIFT" not in text  # nothing is known to be live: unknown is not drift
    assert "…" not in text  # image tags and paths fold, never cut
    assert "container" not in text.split("registry_keys")[0]  # a VM is not a container


@pytest.mark.parametrize("columns", [80, 120])
def test_host_status_without_gpus(gpuless, monkeypatch, columns):
    real = host_status.status
    system = vm(Path(os.environ["SEAT_HOME"]) / "root")
    monkeypatch.setattr("seatkit.cli.host.status.status", lambda profile: real(profile, system))
    text = run_at(columns, ["host", "status"], monkeypatch)
    check_golden(f"host-status-no-gpus-{columns}.txt", text)
    assert max(map(len, text.splitlines())) <= columns
    assert not LITERAL.search(text) and "…" not in text and "DRIFT" not in text


def test_host_gpus_json_says_why_it_is_empty(gpuless):
    done = CliRunner().invoke(seat, ["host", "gpus", "--json"])
    answer = json.loads(done.output)
    assert answer["gpus"] == [] and "no NVIDIA driver" in answer["why"]


@pytest.mark.parametrize(
    "signs, expected", [({"container": "docker"}, "docker (/.dockerenv exists)"), ({}, None)]
)
def test_the_container_check_reads_the_real_signs(tmp_path, signs, expected):
    assert detect.container(vm(tmp_path, **signs)) == expected


def test_a_cgroup_of_a_container_is_a_container(tmp_path):
    system = vm(tmp_path)
    (tmp_path / "proc/1/cgroup").write_text("12:pids:/docker/0123abcd\n0::/\n")
    assert detect.container(system) == "docker (/proc/1/cgroup)"


def test_an_unreadable_setting_is_explained_by_what_this_machine_is(tmp_path):
    status = host_status.status(host_profiles.load("paper"), vm(tmp_path / "vm"))
    profile = profiles.load(profiles.DEFAULT_PROFILE)
    fixes = {
        name: host_rows.rows(status, profile, system)
        for name, system in (
            ("vm", vm(tmp_path / "vm")),
            ("container", vm(tmp_path / "c", container="docker")),
            ("user", vm(tmp_path / "u", euid=1000)),
        )
    }
    iommu = {name: next(r for r in rows if r.check == "iommu").fix for name, rows in fixes.items()}
    assert "container" not in iommu["vm"] and "seat host plan paper" in iommu["vm"]
    assert "runs in a container, docker (/.dockerenv exists)" in iommu["container"]
    assert "as root" in iommu["user"]


def test_status_names_the_process_id_and_prints_no_python_literals(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    launch._record(
        launch.Running(
            "cpu-smoke",
            "native",
            str(os.getpid()),
            "http://127.0.0.1:9",
            "tiny",
            str(tmp_path / "cpu-smoke.log"),
            time.time(),
            since=process_start(os.getpid()),
        )
    )
    monkeypatch.setattr(
        launch,
        "status",
        lambda profile: {
            **launch.asdict(launch.recorded(profile)),
            "state": "running",
            "health": 200,
            "models": ["tiny"],
        },
    )
    text = CliRunner().invoke(seat, ["status", "cpu-smoke"]).output
    assert re.search(rf"^ *process id: {os.getpid()}$", text, re.M), text
    assert "models: tiny" in text and "profiling: off" in text
    assert not LITERAL.search(text), text


def seat_cli(args, home, timeout=60):
    return subprocess.run(
        [str(BIN / "seat"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "SEAT_HOME": str(home)},
    )


def test_logs_prints_and_returns_and_follows_only_on_f(tmp_path):
    """A script's `seat logs` ends; `-f` follows the running seat (this test's own process)."""
    log = tmp_path / "logs" / "cpu-smoke.log"
    log.parent.mkdir()
    log.write_text("server line 1\n")
    (tmp_path / "run").mkdir()
    record = launch.Running(
        "cpu-smoke",
        "native",
        str(os.getpid()),
        "http://127.0.0.1:9",
        "tiny",
        str(log),
        time.time(),
        since=process_start(os.getpid()),
    )
    (tmp_path / "run" / "cpu-smoke.json").write_text(json.dumps(launch.asdict(record)))
    done = seat_cli(["logs", "cpu-smoke"], tmp_path, timeout=30)
    assert done.returncode == 0 and done.stdout == "server line 1\n", done.stderr
    with pytest.raises(subprocess.TimeoutExpired):  # the seat runs on: -f keeps following it
        seat_cli(["logs", "-f", "cpu-smoke"], tmp_path, timeout=5)


def test_a_stopped_seats_log_stays_readable(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "cpu-smoke.log").write_text("last words\n")
    done = seat_cli(["logs", "cpu-smoke"], tmp_path)  # no run record: `seat down` removed it
    assert done.returncode == 0 and done.stdout == "last words\n", done.stderr
    followed = seat_cli(["logs", "-f", "cpu-smoke"], tmp_path)
    assert followed.returncode == 0 and "is not running" in followed.stderr
    never = seat_cli(["logs", "cpu-smoke"], tmp_path / "elsewhere")
    assert never.returncode == 1 and "never started by `seat up`" in never.stderr
    assert "Traceback" not in never.stderr


def test_selftest_blocks_say_which_point_and_which_figure_is_true(monkeypatch):
    """At 80 columns the tables go vertical: each block names its point, each cell true / measured."""
    from seatkit.bench import selftest

    figures = {"decode_tok_s": 200.0, "tokens_per_step": 1.0, "ms_per_step": 5.0}
    sweep_figures = {"aggregate_tok_s": 1555.6, "tokens_per_step": 3.5, "ms_per_step": 9.0}
    point = {
        "true": figures,
        "measured": figures,
        "error": {"decode_tok_s": 0.001},
        "client_decode_tok_s": 199.0,
        "client_error": 0.005,
        "client_cpu_us_per_token": 150.0,
    }
    level = {
        "concurrency": 4,
        "true": sweep_figures,
        "measured": sweep_figures,
        "error": {"ms_per_step": 0.0},
    }
    result = {
        "points": [point, point],
        "sweep": [level],
        "worst_error": 0.001,
        "goal": 0.005,
        "identity_error": 0.0,
        "met": True,
        "client_cpu_us_per_token": 20.0,
    }
    monkeypatch.setattr(
        selftest,
        "selftest",
        lambda repeats, progress: {**result, "sweep": [{**level, "client_cpu_us_per_token": 20.0}]},
    )
    monkeypatch.setattr(app.out, "width", 80)
    text = CliRunner().invoke(seat, ["bench", "selftest"]).output
    assert text.count("point: ") == 2 and "point: 2 of 2" in text and "streams: 4" in text, text
    assert "tok/s true / measured: 200.0 / 200.0" in text
    assert not re.search(r"^\s*measured:", text, re.M)  # no figure without its name


def test_drafting_under_k_is_a_policy_not_an_alarm():
    from seatkit.bench import decompose, metrics

    def drafted(per_step):  # 33 steps, 33 drafts of per_step tokens each, all accepted
        return decompose.factors(
            metrics.Snapshot(
                values={
                    "drafts": 33,
                    "draft_tokens": 33 * per_step,
                    "accepted": 33 * per_step,
                    "steps": 33,
                    "decode_seconds": 1.0,
                    "step_seconds": 1.0,
                }
            ),
            1 + 33 * (1 + per_step),
            0.5,
            1.5,
            10,
        )

    # Fewer than k is a policy (ngram's match, an adaptive drafter), never an alarm; over k is a fault.
    assert "drafted-length" not in decompose.alarms(drafted(4), 5, 0.0)
    assert "drafted-length" in decompose.alarms(drafted(6), 5, 0.0)


def test_every_alarm_the_bench_raises_is_explained_with_whether_the_figures_stand():
    from seatkit.bench import alarms

    source = (REPO / "seatkit" / "bench" / "decompose.py").read_text()
    body = source[source.index("\ndef alarms(") :].split("\ndef ")[1]  # the alarms, not the factors
    raised = set(re.findall(r'out\["([a-z-]+)"\] = ', body)) | {"usage-disagrees"}  # run.py's own
    assert raised >= {"drafted-length", "client-bursts", "loop"}
    for kind in raised:
        assert "no explanation" not in alarms.explained(kind), kind
    assert alarms.stands("client-bursts") and not alarms.stands("loop")


def test_a_note_under_which_the_figures_stand_is_not_an_alarm(monkeypatch, tmp_path):
    from seatkit.cli import bench_run

    summary = {
        "suites": {},
        "discarded": 0,
        "alarms": {
            "client-bursts": {"requests": 1, "example": "the stream reached the client in bursts"},
            "loop": {"requests": 2, "example": "output loops"},
        },
    }
    buffer = io.StringIO()
    monkeypatch.setattr(bench_run, "out", Console(file=buffer, width=100))
    bench_run.print_summary(summary, tmp_path)
    printed = buffer.getvalue()
    assert printed.index("alarm loop") < printed.index("note client-bursts")
    assert "note client-bursts (1 request): " in printed and "alarm loop (2 requests): " in printed
    assert "figures above stand? Yes" in " ".join(printed.split("note client-bursts")[1].split())
    assert "figures above stand? No: they flatter" in " ".join(printed.split("alarm loop")[1].split())


def test_make_install_links_seat_for_the_user_and_leaves_anothers_alone(tmp_path):
    make = ["make", "-s", "-C", str(REPO), "-o", ".venv/.installed"]
    bindir = tmp_path / "my bin"  # a space in the path, as a home folder may have
    done = subprocess.run([*make, "install", f"BINDIR={bindir}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert os.readlink(bindir / "seat") == str(REPO / ".venv" / "bin" / "seat")
    assert "is not on your PATH" in done.stdout
    gone = subprocess.run(
        [*make, "uninstall", f"BINDIR={bindir}"], capture_output=True, text=True, timeout=60
    )
    assert gone.returncode == 0 and not (bindir / "seat").exists()
    (bindir / "seat").write_text("#!/bin/sh\necho someone else's seat\n")
    refused = subprocess.run(
        [*make, "install", f"BINDIR={bindir}"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0 and "left alone" in refused.stdout
    assert "someone else's" in (bindir / "seat").read_text()
    (bindir / "seat").unlink()
    (bindir / "seat").symlink_to(tmp_path / "a-removed-venv" / "bin" / "seat")  # dangling: still not ours
    refused = subprocess.run(
        [*make, "install", f"BINDIR={bindir}"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0 and "left alone" in refused.stdout
    assert os.readlink(bindir / "seat") == str(tmp_path / "a-removed-venv" / "bin" / "seat")
    (bindir / "seat").unlink()
    nothing = subprocess.run(
        [*make, "uninstall", f"BINDIR={bindir}"], capture_output=True, text=True, timeout=60
    )
    assert nothing.returncode == 0 and "nothing to remove: no seat in" in nothing.stdout, nothing.stdout


def test_a_dry_apply_says_first_whether_yes_would_act_then_what_blocks_it(tmp_path):
    from types import SimpleNamespace

    from seatkit.cli import host_change

    blocked = SimpleNamespace(
        refusals=[
            "the driver is unknown: the five-key form is refused",
            "turning the IOMMU off needs --acknowledge-iommu-off. More.",
        ],
        snippet="",
        ops=[],
    )
    said = host_change._would(blocked, vm(tmp_path))
    assert said.startswith("[red]--yes would not act[/]: 2 things block it")
    one = host_change._would(SimpleNamespace(refusals=blocked.refusals[:1], snippet="", ops=[]), vm(tmp_path))
    assert one.startswith("[red]--yes would not act[/]: 1 thing blocks it")
    assert "  - the driver is unknown\n  - turning the IOMMU off needs --acknowledge-iommu-off" in said
    assert "acting needs root" in host_change._would(
        SimpleNamespace(refusals=[], snippet="", ops=[1]), vm(tmp_path, euid=1000)
    )
    clear = host_change._would(SimpleNamespace(refusals=[], snippet="", ops=[1, 2]), vm(tmp_path))
    assert clear == "--yes would apply this plan: 2 changes, then a reboot"
    done = CliRunner().invoke(seat, ["host", "apply", "paper"])  # this machine, whatever it is
    assert done.output.startswith("--yes would "), done.output


def test_verifying_an_overlay_never_fetched_says_to_fetch_it(tmp_path):
    done = seat_cli(["overlay", "verify", str(tmp_path / "vllm")], tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 1 and "it was never fetched" in said
    assert "hint: seat overlay fetch" in said and f"--dest {tmp_path / 'vllm'}" in said
    assert "Traceback" not in done.stderr


def test_status_of_a_typo_is_an_error_and_a_down_seat_says_what_next(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    typo = seat_cli(["status", "cpu-smok"], tmp_path)
    assert typo.returncode == 1 and "no profile 'cpu-smok'" in typo.stderr and "cpu-smoke" in typo.stderr
    down = CliRunner().invoke(seat, ["status", "cpu-smoke"])
    assert down.exit_code == 0 and "state: down" in down.output and "next: seat up cpu-smoke" in down.output


def test_a_command_or_path_in_a_message_is_never_broken_by_a_newline(tmp_path, monkeypatch):
    """At 80 columns `seat status` printed 'next: seat up' and the profile on the next line, and
    an error's hint folded its list of profiles: what a newcomer pastes must be one line."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "80")
    down = seat_cli(["status", profiles.DEFAULT_PROFILE], tmp_path)
    assert f"\nnext: seat up {profiles.DEFAULT_PROFILE}\n" in down.stdout, down.stdout
    typo = seat_cli(["status", "cpu-smok"], tmp_path)
    assert f"\nhint: profiles: {', '.join(profiles.profile_names())}\n" in typo.stderr, typo.stderr
    where = tmp_path / ("a-folder-deep-enough-that-its-path-runs-past-eighty-columns-" * 2) / "vllm"
    missing = seat_cli(["overlay", "verify", str(where)], tmp_path)
    assert missing.returncode == 1 and any(str(where) in line for line in missing.stderr.splitlines()), (
        missing.stderr
    )


def test_status_of_a_broken_profile_says_what_is_wrong_never_seat_up_it(tmp_path, monkeypatch):
    """`seat status typo.yaml` said 'state: down, next: seat up typo': a name that is no profile,
    for a file `seat up` would refuse. A down seat's profile is read first; next names it as given."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    good = tmp_path / "mine.yaml"
    good.write_text((REPO / "profiles" / "cpu-smoke.yaml").read_text())
    done = seat_cli(["status", str(good)], tmp_path)
    assert done.returncode == 0 and f"next: seat up {good}\n" in done.stdout, done.stdout + done.stderr
    typo = tmp_path / "typo.yaml"
    typo.write_text(good.read_text().replace("  port:", "  prot:"))
    (tmp_path / "adir.yaml").mkdir()
    for path, said in ((typo, "field 'server.prot': unknown field"), (tmp_path / "adir.yaml", "is a folder")):
        done = seat_cli(["status", str(path)], tmp_path)
        assert done.returncode == 1 and said in done.stderr and "next:" not in done.stdout, (
            done.stdout + done.stderr
        )


def test_the_plans_host_line_calls_a_container_no_vm_and_says_an_unknown_stack_once(tmp_path, monkeypatch):
    """'VM: docker' named a container a VM, and 'boot stack unknown (no boot stack recognised (...))'
    said the same thing twice, nested."""
    from seatkit.cli import host_change
    from seatkit.host import plan as host_plan

    system = vm(tmp_path / "root", container="docker")
    system.runner = lambda argv: (0, "docker\n") if argv[0] == "systemd-detect-virt" else (127, "")
    plan = host_plan.build(host_profiles.load("paper"), system, host_plan.Choices())
    buffer = io.StringIO()
    monkeypatch.setattr(host_change, "out", Console(file=buffer, width=400))
    host_change._show(plan)
    (line,) = [x for x in buffer.getvalue().splitlines() if x.startswith("host: ")]
    assert "runs under docker" in line and "VM:" not in line, line
    assert line.count("no boot stack recognised") == 1 and "boot stack unknown" not in line, line


def test_no_driver_in_a_container_says_to_give_it_the_gpus_not_to_install_a_driver(
    tmp_path, gpuless, monkeypatch
):
    """In a docker container without --gpus, 'install the NVIDIA driver' is wrong: the driver is the host's."""
    inside = vm(tmp_path / "docker-root", container="docker")
    monkeypatch.setattr(host_rows, "System", lambda: inside)
    rows = {r["check"]: r for r in diagnose.diagnose(profiles.DEFAULT_PROFILE)["rows"]}
    for check in ("driver", "GPU count"):
        assert "install the NVIDIA driver" not in rows[check]["fix"], rows[check]
        assert "docker run --gpus all" in rows[check]["fix"] and "/.dockerenv" in rows[check]["fix"]
