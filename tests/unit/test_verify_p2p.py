"""`seat host verify-p2p`: judging the probe's result, keeping it with the boot id, and status."""

import copy
import json
from pathlib import Path

import pytest

from seatkit.errors import SeatError
from seatkit.host import gpus, p2p, status
from seatkit.host.system import System
from seatkit.seat import host_profiles

FIXTURES = Path(__file__).parent.parent / "fixtures"
TWO = json.loads((FIXTURES / "h200x2-verify-p2p.json").read_text())  # a real run on two H200s
ONE = json.loads((FIXTURES / "h200-verify-p2p.json").read_text())  # the same, one GPU visible
RAW_KEYS = ("torch", "cuda", "gpus", "nccl", "pairs", "allreduce")


def raw(result):
    return {k: copy.deepcopy(result[k]) for k in RAW_KEYS}


def host(tmp_path, boot="aaaa"):
    (tmp_path / "proc/sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc/sys/kernel/random/boot_id").write_text(boot + "\n")
    return System(root=tmp_path)


def test_the_real_two_gpu_run_checked_every_pair_and_is_verified():
    assert TWO["verdict"] == "verified" and TWO["problems"] == [] and len(TWO["gpus"]) == 2
    assert [(p["from"], p["to"]) for p in TWO["pairs"]] == [(0, 1), (1, 0)]
    for pair in TWO["pairs"]:
        assert pair["copy_ok"] and pair["kernel_read_ok"] and pair["can_access_peer"]
        assert pair["sizes_checked"] == 13 and pair["largest_bytes"] == 64 << 20
        assert pair["bandwidth_gb_s"] > 10
    assert TWO["allreduce"]["bytes"] == 80 * 1024 and TWO["allreduce"]["correct"]
    assert 1 < TWO["allreduce"]["us"] < 1000
    assert p2p.judge(raw(TWO)) == TWO  # judging again gives what the run printed


def test_one_gpu_reports_no_peers_to_check():
    assert ONE["verdict"] == "no peers to check" and ONE["pairs"] == [] and ONE["allreduce"] is None
    assert p2p.judge(raw(ONE))["verdict"] == "no peers to check"


def test_a_wrong_byte_anywhere_fails_the_verdict_and_names_the_pair_and_size():
    result = raw(TWO)
    result["pairs"][1]["mismatches"]["kernel"] = [{"bytes": 4194304, "wrong": 17}]
    result["pairs"][0]["can_access_peer"] = False
    result["allreduce"]["correct"] = False
    judged = p2p.judge(result)
    assert judged["verdict"] == "failed"
    assert judged["problems"] == [
        "GPU1 -> GPU0: kernel wrong at 4194304 B",
        "GPU1 reports no peer access to GPU0",
        "the all-reduce returned a wrong sum",
    ]


def test_status_shows_the_data_path_only_for_the_boot_that_verified_it(tmp_path, monkeypatch):
    monkeypatch.setattr(gpus, "inventory", lambda system=None: None)
    system = host(tmp_path, "boot-1")
    row = status.status(host_profiles.load("paper"), system)["data_path"]
    assert row["verdict"] == "not verified" and "no `seat host verify-p2p` result" in row["why"]
    p2p.store(TWO, system)
    row = status.status(host_profiles.load("paper"), system)["data_path"]
    assert row["verdict"] == "verified on this boot" and "2 pairs byte-checked" in row["why"]
    assert f"all-reduce {TWO['allreduce']['us']:.1f} us" in row["why"]
    system = host(tmp_path, "boot-2")  # rebooted since
    row = p2p.data_path(system)
    assert row["verdict"] == "not verified" and "from another boot" in row["why"]
    p2p.store(p2p.judge({**raw(TWO), "allreduce": {**TWO["allreduce"], "correct": False}}), system)
    row = p2p.data_path(system)
    assert row["verdict"] == "FAILED on this boot" and "wrong sum" in row["why"]


def test_probe_errors_become_clear_messages(monkeypatch, tmp_path):
    script = tmp_path / "probe.py"
    monkeypatch.setattr(p2p, "PROBE", script)
    script.write_text(
        "import json; print(json.dumps({'error': 'no CUDA device: torch.cuda.is_available() is False'}))"
    )
    with pytest.raises(SeatError, match="cannot check the data path: no CUDA device") as caught:
        p2p.run_probe()
    assert caught.value.code == p2p.NO_CUDA
    script.write_text("import sys; sys.stderr.write('Segmentation fault'); sys.exit(139)")
    with pytest.raises(SeatError, match=r"printed no result \(exit 139\): Segmentation fault"):
        p2p.run_probe()


def test_the_image_run_attaches_every_gpu_and_mounts_the_probe_read_only():
    argv = p2p.probe_argv("seat:dsv4")
    assert argv[:5] == ["docker", "run", "--rm", "--gpus", "all"] and "NCCL_NVLS_ENABLE=0" in argv
    assert f"{p2p.PROBE}:/seatkit-p2p-probe.py:ro" in argv and argv[-2:] == [
        "seat:dsv4",
        "/seatkit-p2p-probe.py",
    ]


def test_the_real_two_gpu_host_shows_the_verified_path_and_its_links():
    """`seat host status --json` and `seat host gpus --json` on the same two-H200 machine after it."""
    result = json.loads((FIXTURES / "h200x2-host-status.json").read_text())
    assert result["data_path"]["verdict"] == "verified on this boot"
    assert result["data_path"]["why"].startswith("2 pairs byte-checked")
    inventory = json.loads((FIXTURES / "h200x2-host-gpus.json").read_text())
    assert len(inventory["gpus"]) == 2 and len(inventory["p2p"]) == 2
    for pair in inventory["p2p"]:  # these peers talk over NVLink: the figures say nothing about PCIe
        assert pair["read"] == pair["write"] == pair["nvlink"] == "OK"
