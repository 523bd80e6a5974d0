"""What a person reads from status, up, doctor, report.md and the dry run, as golden output at 80
columns, and the frictions a newcomer met in each (issue 38), one check each.

Times and the per-run SEAT_HOME are masked (the same length, so text wraps the same). Golden files
are in tests/fixtures/golden/; SEAT_REGEN_GOLDEN=1 rewrites them: read the diff before committing.
"""

import json
import os
import re
import shlex
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO
from test_newcomer_output import LITERAL, check_golden, vm

from seatkit.bench import report
from seatkit.cli import app
from seatkit.cli.app import seat
from seatkit.doctor import diagnose
from seatkit.doctor import host as host_rows
from seatkit.seat import what_runs
from seatkit.serve import launch
from seatkit.serve.running import Running

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@pytest.fixture
def fixed_home(monkeypatch):
    """A SEAT_HOME whose path has the same length in every run, masked as /tmp/seat-home-XXXXXXXX."""
    home = Path(tempfile.mkdtemp(prefix="seat-home-", dir="/tmp"))
    assert len(home.name) == len("seat-home-XXXXXXXX")
    monkeypatch.setenv("SEAT_HOME", str(home))
    monkeypatch.setattr(app.out, "width", 80)
    yield home
    subprocess.run(["rm", "-rf", "--", str(home)], check=True)


def masked(text: str, home: Path) -> str:
    text = STAMP.sub("YYYY-MM-DDThh:mm:ssZ", text.replace(str(home), "/tmp/seat-home-XXXXXXXX"))
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def record(home: Path, runtime: str = "native", ident: str = "15407") -> Running:
    return Running(
        "cpu-smollm2",
        runtime,
        ident,
        "http://127.0.0.1:18200",
        "smollm2",
        str(home / "logs" / "cpu-smollm2.log"),
        time.time() - 7200,
        profile_source=str(REPO / "profiles" / "cpu-smollm2.yaml"),
        provenance={"differs": [], "profile_sha256": "9f2c" * 16, "model_locks": None},
    )


def status_of(run: Running, home: Path, monkeypatch) -> str:
    info = {**launch.asdict(run), "state": "running", "health": 200, "models": ["smollm2"]}
    info["unverified"] = what_runs.mark(run.conditions())  # as launch.status says it
    monkeypatch.setattr(launch, "status", lambda profile: dict(info))
    return masked(CliRunner().invoke(seat, ["status", "cpu-smollm2"]).stdout, home).replace(str(REPO), "REPO")


def test_status_of_a_running_native_seat(fixed_home, monkeypatch):
    text = status_of(record(fixed_home), fixed_home, monkeypatch)
    check_golden("status-native-80.txt", text)
    assert max(map(len, text.splitlines())) <= 80 and not LITERAL.search(text)
    labels = [line.split(":")[0].strip() for line in text.splitlines() if re.match(r"^ *[a-z/ 0-9]+: ", line)]
    assert labels and not [label for label in labels if "_" in label], labels  # words, not field names
    assert "process id: 15407" in text and "vouched" not in text  # a native seat has no image
    # Narrower, the hash wraps under itself, never to the start of a line.
    monkeypatch.setattr(app.out, "width", 60)
    narrow = status_of(record(fixed_home), fixed_home, monkeypatch).splitlines()
    at = next(i for i, line in enumerate(narrow) if "profile sha256:" in line)
    column = narrow[at].index("9f2c")
    assert narrow[at + 1].startswith(" " * column + "9f2c"), narrow[at : at + 2]


def test_status_of_a_docker_seat_names_its_container_and_its_image(fixed_home, monkeypatch):
    text = status_of(record(fixed_home, "docker", "0123456789abcdef" * 4), fixed_home, monkeypatch)
    assert "container: 0123456789ab" in text and "its image vouched for" in text


def test_status_without_a_profile_on_any_machine_offers_the_cpu_seat_first(fixed_home):
    down = CliRunner().invoke(seat, ["status"]).stdout
    offered = down[down.index("next") :]
    assert offered.index("seat up cpu-smollm2") < offered.index("seat up dsv4-flash-dspark-tp4"), down
    assert "or, on four GPUs: seat up dsv4-flash-dspark-tp4" in down  # the GPU seat says what it needs


def up_output(run: Running, home: Path, monkeypatch) -> str:
    monkeypatch.setattr(launch, "up", lambda spec, tick, image_check: (run, 38.3))
    done = CliRunner().invoke(seat, ["up", "cpu-smollm2"])
    assert done.exit_code == 0, done.output
    return masked(done.stdout, home)


def test_up_names_the_process_id_and_prints_whole_commands(fixed_home, monkeypatch):
    text = up_output(record(fixed_home), fixed_home, monkeypatch)
    check_golden("up-native-80.txt", text)
    assert "(process id 15407)" in text and "(native " not in text
    commands = [line.strip() for line in text.splitlines()[text.splitlines().index("next:") + 1 :]]
    assert commands == [
        "curl http://127.0.0.1:18200/v1/models",
        "seat logs cpu-smollm2",
        "seat down cpu-smollm2",
    ]


@pytest.fixture
def gpuless_vm(fixed_home, monkeypatch):
    """doctor on a fake VM without a driver: the machine of `make demo`."""
    system = vm(fixed_home / "root")
    monkeypatch.setattr(diagnose.gpu_readings, "read", lambda: {"error": "no NVIDIA driver answers (NVML)"})
    monkeypatch.setattr(host_rows, "System", lambda: system)
    monkeypatch.setattr("seatkit.host.gpus.inventory", lambda system_=None: None)
    monkeypatch.chdir(fixed_home)
    return fixed_home


def test_doctor_of_the_demo_seat_judges_no_host_and_fails_nothing_it_cannot_check(gpuless_vm):
    done = CliRunner().invoke(seat, ["doctor", "cpu-smollm2"])
    text = masked(done.stdout, gpuless_vm)
    check_golden("doctor-cpu-smollm2-80.txt", text)
    assert max(map(len, text.splitlines())) <= 80 and not LITERAL.search(text)
    assert text.lstrip().startswith("seat doctor cpu-smollm2\n") and "host profile" not in text
    rows = json.loads(CliRunner().invoke(seat, ["doctor", "cpu-smollm2", "--json"]).stdout)["rows"]
    failed = [r for r in rows if r["status"] == "FAIL"]
    assert done.exit_code == (1 if failed else 0), (done.exit_code, failed)  # the exit-code rule
    assert "no NVIDIA driver answers NVML" not in text


def test_report_md_reads_as_words(tmp_path):
    summary = json.loads((REPO / "tests" / "fixtures" / "demo-run" / "summary.json").read_text())
    text = report.markdown(summary)
    check_golden("report-demo.md", text)
    assert "sampling temperature 0.0, top_p 1.0, seed 0," in text and "{'" not in text
    assert "1 warm-up then 3 measured repeats" in text and "1 warm-ups" not in text
    assert "n/a ms" not in text and "no warm request" in text  # prose had no prefix-cache hit
    assert "ms_per_step_vs" not in text and "ttft_ms_vs" not in text
    assert "- TTFT against prompt length: 51.66 ms + 1.1962 ms per prompt token, over 10 requests" in text
    assert "tok s" not in text  # figure names as people write them (tok/s), not field names


def test_the_dry_run_shows_json_as_json_and_says_nothing_started(fixed_home):
    done = subprocess.run(
        [str(REPO / "serve" / "cpu-smollm2.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PATH": os.environ["PATH"],
            "SEAT_HOME": str(fixed_home),
            "SEAT_DRY_RUN": "1",
            "SEAT_PORT": "18200",
        },
    )
    assert done.returncode == 0, done.stderr
    text = masked(done.stdout + done.stderr, fixed_home)
    check_golden("dry-run-cpu-smollm2.txt", text)
    assert "\\{" not in text and '\\"' not in text
    config = next(line for line in done.stdout.splitlines() if "--speculative-config" in line)
    value = shlex.split(config.rstrip(" \\"))[1]
    assert json.loads(value)["method"] == "ngram"  # pasted into a shell, it is the JSON
    assert done.stderr.splitlines()[-1].startswith("seat: a dry run: nothing was started")
    # A command is one line, so it can be pasted: every line but the command's is within 80 columns.
    assert all(len(line) <= 80 for line in done.stderr.splitlines()[-1:])


def test_a_second_down_succeeds_because_nothing_is_left_to_stop(fixed_home):
    done = CliRunner().invoke(seat, ["down", "cpu-smollm2"])
    assert done.exit_code == 0 and done.stdout.startswith("nothing to stop: cpu-smollm2 is not running")


def test_compare_says_no_padding_at_context_0_and_what_a_share_over_100_means(tmp_path):
    run = REPO / "tests" / "fixtures" / "demo-run"
    done = CliRunner().invoke(seat, ["bench", "compare", str(run), str(run)], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert "padding: none (the prompt alone) vs none (the prompt alone)" in done.stdout
    assert "unknown vs unknown" not in done.stdout.split("padding:")[1].splitlines()[0]
    card = CliRunner().invoke(
        seat, ["bench", "compare", "paper-pt-r-2026-042#S12-S14-code", "paper-pt-r-2026-042#S12-S14-prose"]
    )
    said = " ".join(card.stdout.split())
    assert "carries 123% of the gap" in said and "one over 100 % carries more than the whole gap" in said


def test_host_texts_say_no_python_values_and_no_driver_plainly(tmp_path):
    from seatkit.host import state
    from seatkit.host import status as host_status

    row = host_status._row(
        "rebar",
        True,
        state.Reading(False, "no modprobe.d file sets nvidia options"),
        state.Reading(True, "NVML"),
        "PENDING-RELOAD",
    )
    assert row["verdict"] == "REVERTS" and "configures False" not in row["why"]
    assert "configured no (no modprobe.d file sets nvidia options)" in row["why"]
    gpus = CliRunner().invoke(seat, ["host", "gpus"], env={"COLUMNS": "80"})
    assert "no NVIDIA driver answers NVML" not in gpus.stdout


def test_the_clones_install_does_not_print_setuptools_editable_note():
    """`make demo` on a fresh clone opened with setuptools' BuildBackendWarning block: the install
    line filters it (by its message, which setuptools emits as a warning in pip's build process)."""
    line = next(x for x in (REPO / "Makefile").read_text().splitlines() if "pip install" in x and "-e " in x)
    setting = re.search(r"PYTHONWARNINGS='([^']+)'", line)
    assert setting, line
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings._setoption(setting.group(1))  # as the interpreter reads PYTHONWARNINGS
        warnings.warn(
            "Editable installation.\n!!\n\n  Please be careful with folders ...", UserWarning, stacklevel=1
        )
        warnings.warn("another warning stays", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["another warning stays"]


def test_a_path_too_long_for_its_cell_folds_between_its_parts_never_inside_a_name():
    from seatkit.cli import output

    said = "live: unknown (/sys/module/nvidia_uvm/parameters/uvm_disable_hmm absent)"
    assert (
        output.fold_paths(said, 44)
        == "live: unknown (/sys/module/nvidia_uvm/parameters/\nuvm_disable_hmm absent)"
    )
    image = "voipmonitor/vllm:chthonic-consecration-f1190eab-b12x0ff2847-pr20-cu132"
    assert output.fold_paths(image, 44) == image  # an image name is no path: rich folds it whole
    # The doctor's table at 80 columns, as test_newcomer_output holds it.
    text = (REPO / "tests" / "fixtures" / "golden" / "doctor-no-gpus-80.txt").read_text()
    assert "uvm_disable_hmm" in text and "/parameters/" in text
