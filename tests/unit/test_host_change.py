"""`seat host plan | apply | rollback | recover` on fake hosts of every boot stack."""

from collections import Counter

import pytest
from fake_host import Death, FakeHost
from hypothesis import given
from hypothesis import strategies as st

from seatkit.errors import SeatError
from seatkit.host import change, cmdline, ops, status
from seatkit.host import plan as host_plan
from seatkit.host.journal import Journal
from seatkit.seat import host_profiles

STACKS = ["grub", "bls", "kernelstub", "systemd-boot"]
ACK = host_plan.Choices(acknowledge_iommu_off=True)


pytestmark = pytest.mark.usefixtures("no_nvml")


def make_plan(host, profile="paper", choices=ACK):
    return host_plan.build(host_profiles.load(profile), host.system, choices)


def apply(host, profile="paper", choices=ACK):
    return change.apply(make_plan(host, profile, choices), host.system)


def verdicts(host, profile="paper"):
    return {
        r["setting"]: r["verdict"] for r in status.status(host_profiles.load(profile), host.system)["rows"]
    }


@pytest.mark.parametrize("stack", STACKS)
def test_apply_is_pending_until_a_reboot_then_ok_and_a_second_apply_does_nothing(tmp_path, stack):
    host = FakeHost(tmp_path, stack)
    assert verdicts(host)["iommu"] == "DRIFT"
    txid = apply(host)
    assert txid and host.changing_calls()
    assert verdicts(host) == {
        "iommu": "PENDING-REBOOT",
        "registry_keys": "PENDING-RELOAD",
        "rebar": "UNKNOWN",
        "hmm_disabled": "PENDING-RELOAD",
    }
    host.reboot()
    assert verdicts(host) == {"iommu": "OK", "registry_keys": "OK", "rebar": "UNKNOWN", "hmm_disabled": "OK"}
    tree, host.calls = host.tree(), []
    assert apply(host) is None
    assert host.tree() == tree and host.changing_calls() == []


@pytest.mark.parametrize("stack", STACKS)
def test_a_dry_run_leaves_the_tree_identical_and_shows_every_change(tmp_path, stack):
    host = FakeHost(tmp_path, stack)
    tree = host.tree()
    plan = make_plan(host)
    assert not plan.refusals and plan.ops and host.changing_calls() == []
    assert host.tree() == tree and not (tmp_path / "var/lib/seatkit").exists()
    diffs = "".join(host_plan.diff(host.system, op) for op in plan.ops if isinstance(op, ops.FileOp))
    assert 'NVreg_RegistryDwords="ForceP2P=0x11;RMForceP2PType=1' in diffs


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("reboot", [False, True])
def test_rollback_restores_the_pristine_tree_byte_for_byte(tmp_path, stack, reboot):
    host = FakeHost(tmp_path, stack)
    pristine = host.tree()
    txid = apply(host)
    assert host.tree() != pristine
    if reboot:
        host.reboot()
        live = ("proc", "sys")  # the reboot changed what is live, not what is configured
        pristine = {
            **{k: v for k, v in pristine.items() if not k.startswith(live)},
            **{k: v for k, v in host.tree().items() if k.startswith(live)},
        }
    change.rollback(host.system)
    assert host.tree() == pristine
    assert Journal(host.system).active() == [] and txid in Journal(host.system).undone()
    with pytest.raises(SeatError, match="nothing to roll back"):
        change.rollback(host.system)


def test_a_file_edited_after_apply_stops_rollback_with_before_ours_and_now(tmp_path):
    host = FakeHost(tmp_path, "grub")
    apply(host)
    conf = host.path(ops.MODPROBE_FILE)
    conf.write_text(conf.read_text() + "options nvidia NVreg_EnableGpuFirmware=0\n")
    tree = host.tree()
    with pytest.raises(SeatError) as caught:
        change.rollback(host.system)
    text = str(caught.value)
    assert "changed since seatkit wrote it" in text and "+options nvidia NVreg_EnableGpuFirmware=0" in text
    assert "--- before" in text and "--- ours" in text and "nothing was changed" in text
    assert host.tree() == tree


def test_conflicting_tokens_are_refused_then_replaced_and_put_back(tmp_path):
    host = FakeHost(tmp_path, "grub", cmdline="quiet iommu=pt amd_iommu=on")
    pristine = host.tree()
    refused = make_plan(host)
    assert any("conflicts with" in r and "--replace" in r for r in refused.refusals)
    apply(host, choices=host_plan.Choices(replace=True, acknowledge_iommu_off=True))
    grub = host.read("/boot/grub/grub.cfg").splitlines()
    default, recovery = grub[1].split(), grub[4].split()
    assert "iommu=pt" not in default and "amd_iommu=on" not in default
    assert default[-2:] == ["iommu=off", "amd_iommu=off"] and "quiet" in default
    assert "iommu=off" not in recovery  # the recovery entry stays a clean way back
    tree, host.calls = host.tree(), []
    assert apply(host, choices=host_plan.Choices(replace=True, acknowledge_iommu_off=True)) is None
    assert host.tree() == tree
    change.rollback(host.system)
    assert host.tree() == pristine


def test_a_cloud_image_drop_in_cannot_discard_the_tokens(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.write(
        "/etc/default/grub.d/50-cloudimg-host_profiles.cfg", 'GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0"\n'
    )
    host.run(["update-grub"])
    apply(host)
    default = host.read("/boot/grub/grub.cfg").splitlines()[1].split()
    assert "console=ttyS0" in default and default[-2:] == ["iommu=off", "amd_iommu=off"]


def test_intel_gets_its_own_tokens_and_bls_covers_future_kernels(tmp_path):
    host = FakeHost(tmp_path, "bls", vendor="GenuineIntel")
    apply(host)
    assert host.read("/etc/kernel/cmdline").split()[-2:] == ["iommu=off", "intel_iommu=off"]
    entry = next(tmp_path.glob("boot/loader/entries/*.conf")).read_text()
    assert "options root=UUID=abc ro quiet splash iommu=off intel_iommu=off" in entry


def test_conservative_keeps_the_iommu_in_passthrough_without_an_acknowledgement(tmp_path):
    host = FakeHost(tmp_path, "grub", driver="580.167.08")
    plan = make_plan(host, "conservative", host_plan.Choices())
    assert not plan.refusals
    change.apply(plan, host.system)
    host.reboot()
    assert verdicts(host, "conservative")["iommu"] == "OK"
    assert "RMForceP2PType" not in host.read(ops.MODPROBE_FILE)


def test_nixos_gets_a_snippet_and_nothing_changes(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.write("/etc/NIXOS", "")
    tree = host.tree()
    plan = make_plan(host)
    assert 'boot.kernelParams = [ "iommu=off" "amd_iommu=off" ];' in plan.snippet
    assert "options nvidia_uvm uvm_disable_hmm=1" in plan.snippet and not plan.ops
    with pytest.raises(SeatError, match="declaratively"):
        change.apply(plan, host.system)
    assert host.tree() == tree


# --- refusals (host-host_profiles.md §3.3 and the safety list) -------------------------------


def _ambiguous(host):
    host.write("/etc/kernelstub/configuration", '{"user": {"kernel_options": []}}')
    host.tool("kernelstub")


def _unknown(host):
    host.path("/usr/sbin/update-grub").unlink()


def _foreign_dwords(host):
    host.write("/etc/modprobe.d/nvidia-p2p.conf", 'options nvidia NVreg_RegistryDwords="ForceP2P=0x11"\n')


def _uki(host):
    host.write("/boot/efi/EFI/Linux/arch-linux.efi", "uki")


def _ostree(host):
    host.write("/run/ostree-booted", "")


def _two_initramfs_generators(host):
    host.tool("dracut")


REFUSALS = [
    ("grub", {}, _ambiguous, "more than one boot stack matches"),
    ("grub", {}, _unknown, "no boot stack recognised"),
    ("grub", {}, _foreign_dwords, "nvidia-p2p.conf sets nvidia NVreg_RegistryDwords"),
    ("systemd-boot", {}, _uki, "unified kernel images"),
    ("grub", {}, _ostree, "rpm-ostree"),
    ("grub", {}, _two_initramfs_generators, "more than one initramfs generator"),
    ("grub", {"initramfs": ()}, None, "no initramfs generator found"),
    ("grub", {"virt": "kvm"}, None, "virtual machine or container (kvm)"),
    ("grub", {"driver": "570.133.20"}, None, "five-key registry form is wrong on driver 570.133.20"),
    ("grub", {"driver": "580.167.08"}, None, "five-key registry form is wrong on driver 580.167.08"),
    ("grub", {"driver": None}, None, "driver version is unknown"),
    ("grub", {"vendor": "Hygon?"}, None, "CPU vendor not recognised"),
]


@pytest.mark.parametrize("stack, options, mutate, reason", REFUSALS, ids=[r[3][:30] for r in REFUSALS])
def test_each_refusal_names_its_reason_and_changes_nothing(tmp_path, stack, options, mutate, reason):
    host = FakeHost(tmp_path, stack, **options)
    if mutate:
        mutate(host)
    tree = host.tree()
    plan = make_plan(host)
    assert any(reason in r for r in plan.refusals), plan.refusals
    with pytest.raises(SeatError, match="refused"):
        change.apply(plan, host.system)
    assert host.tree() == tree and host.changing_calls() == []


def test_turning_the_iommu_off_needs_an_acknowledgement_that_says_what_is_lost(tmp_path):
    plan = make_plan(FakeHost(tmp_path), choices=host_plan.Choices())
    (reason,) = plan.refusals
    assert "--acknowledge-iommu-off" in reason and "DMA isolation" in reason and "conservative" in reason


def test_acting_needs_root_but_planning_does_not(tmp_path):
    host = FakeHost(tmp_path, euid=1000)
    plan = make_plan(host)
    assert plan.ops and not plan.refusals
    with pytest.raises(SeatError, match="needs root"):
        change.apply(plan, host.system)


def test_many_cpus_warn_about_x2apic(tmp_path):
    plan = make_plan(FakeHost(tmp_path, cpus=256))
    assert any("256 CPUs" in w and "x2APIC" in w for w in plan.warnings) and not plan.refusals


def test_an_owned_file_edited_since_apply_is_refused(tmp_path):
    host = FakeHost(tmp_path)
    apply(host)
    host.reboot()
    host.path(ops.MODPROBE_FILE).write_text('options nvidia NVreg_RegistryDwords=""\n')
    assert any("changed since seatkit wrote it" in r for r in make_plan(host).refusals)


def test_another_change_in_the_same_boot_is_refused_until_a_reboot(tmp_path):
    host = FakeHost(tmp_path, driver="590.44.01")
    apply(host)
    refusals = make_plan(host, "conservative", host_plan.Choices()).refusals
    assert any("applied in this boot" in r for r in refusals)
    host.reboot()
    assert not make_plan(host, "conservative", host_plan.Choices()).refusals


# --- failures injected at every step ------------------------------------------------------------


def fault_points(stack):
    """Every named step of an apply on this stack, in order."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        host = FakeHost(Path(folder), stack)
        points = []
        host.system.fault = points.append
        apply(host)
        return points


FAULTS = [(stack, point) for stack in STACKS for point in fault_points(stack)]


@pytest.mark.parametrize("stack, point", FAULTS, ids=[f"{s}: {p}" for s, p in FAULTS])
def test_death_at_any_step_of_apply_is_undone_by_recover(tmp_path, stack, point):
    host = FakeHost(tmp_path, stack)
    pristine = host.tree()

    def die(at):
        if at == point:
            raise Death(at)

    host.system.fault = die
    with pytest.raises(Death):
        apply(host)
    host.system.fault = lambda at: None
    assert any("interrupted" in r for r in make_plan(host).refusals) or "begin" in point
    # a begin record cut short is no transaction at all: nothing had changed yet
    assert len(change.recover(host.system)) == (0 if point == "inside the journal record begin" else 1)
    assert host.tree() == pristine and Journal(host.system).open() == []
    assert apply(host)  # and the host takes a fresh apply afterwards


@pytest.mark.parametrize(
    "stack, tool",
    [
        ("grub", "update-grub"),
        ("grub", "update-initramfs"),
        ("bls", "grubby"),
        ("kernelstub", "kernelstub"),
        ("systemd-boot", "kernel-install"),
    ],
)
def test_a_failing_tool_leaves_an_open_transaction_that_recover_undoes(tmp_path, stack, tool):
    host = FakeHost(tmp_path, stack)
    pristine = host.tree()
    host.failing.add(tool)
    with pytest.raises(SeatError, match=rf"{tool}.*failed \(exit 1\)") as caught:
        apply(host)
    assert "seat host recover" in caught.value.hint
    host.failing.clear()
    change.recover(host.system)
    assert host.tree() == pristine


def test_death_during_rollback_is_finished_by_recover(tmp_path):
    host = FakeHost(tmp_path, "kernelstub")
    pristine = host.tree()
    apply(host)
    host.system.fault = lambda at: (_ for _ in ()).throw(Death(at)) if at == "ran kernelstub" else None
    with pytest.raises(Death):
        change.rollback(host.system)
    host.system.fault = lambda at: None
    change.recover(host.system)
    assert host.tree() == pristine and Journal(host.system).active() == []


# --- command-line token edits -------------------------------------------------------------------

TOKENS = st.lists(
    st.sampled_from(
        [
            "quiet",
            "splash",
            "ro",
            "iommu=pt",
            "iommu=off",
            "amd_iommu=on",
            "amd_iommu=off",
            "intel_iommu=on",
            "iommu=soft",
            "rhgb",
        ]
    ),
    max_size=8,
)
WANTED = st.sampled_from([["iommu=off", "amd_iommu=off"], ["iommu=off", "intel_iommu=off"], ["iommu=pt"]])


@given(TOKENS, WANTED)
def test_token_edits_round_trip_exactly_and_are_idempotent(tokens, wanted):
    edit = cmdline.plan(tokens, wanted, replace=True)
    edited = cmdline.apply(tokens, edit)
    assert all(w in edited for w in wanted) and not cmdline.conflicts(edited, wanted)
    # only conflicting tokens go, only wanted ones come, nothing is duplicated
    gone, came = Counter(tokens) - Counter(edited), Counter(edited) - Counter(tokens)
    assert set(gone) <= set(cmdline.conflicts(tokens, wanted)) and set(came) <= set(wanted)
    assert all(count == 1 for count in came.values())
    assert cmdline.undo(edited, edit) == tokens
    assert cmdline.plan(edited, wanted, replace=False).empty
    assert cmdline.Edit.from_json(edit.to_json()) == edit


@given(TOKENS, WANTED)
def test_without_replace_a_conflict_is_refused_and_nothing_else_is(tokens, wanted):
    if cmdline.conflicts(tokens, wanted):
        with pytest.raises(SeatError, match="--replace"):
            cmdline.plan(tokens, wanted, replace=False)
    else:
        edit = cmdline.plan(tokens, wanted, replace=False)
        assert not edit.replaced and cmdline.apply(tokens, edit)[: len(tokens)] == tokens


@pytest.mark.parametrize("stack", STACKS)
def test_after_a_rollback_before_the_reboot_status_says_it_reverts_at_the_next_boot(tmp_path, stack):
    host = FakeHost(tmp_path, stack)
    apply(host)
    host.reboot()
    change.rollback(host.system)
    rows = {r["setting"]: r for r in status.status(host_profiles.load("paper"), host.system)["rows"]}
    assert {k: rows[k]["verdict"] for k in ("iommu", "registry_keys", "hmm_disabled")} == {
        "iommu": "REVERTS",
        "registry_keys": "REVERTS",
        "hmm_disabled": "REVERTS",
    }
    assert rows["iommu"]["why"].startswith("reverts at the next boot: ")
    host.reboot()
    assert verdicts(host)["iommu"] == "DRIFT"
