"""`seat host plan | apply | rollback | recover` (seatkit/host/change.py) on fake hosts of every boot stack,
and on odd hosts and after crashes (issue 11)."""

import json
import os
from collections import Counter

import pytest
from fake_host import ACK, KVER, MACHINE, Death, FakeHost, apply, edited_tokens, make_plan, unedited_tokens
from hypothesis import given
from hypothesis import strategies as st

from seatkit.errors import SeatError
from seatkit.host import boot_stacks, change, cmdline, ops, status, system
from seatkit.host import plan as host_plan
from seatkit.host.journal import Journal
from seatkit.seat import host_profiles

STACKS = ["grub", "bls", "kernelstub", "systemd-boot"]


pytestmark = pytest.mark.usefixtures("no_nvml")


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
    edited = edited_tokens(tokens, edit)
    assert all(w in edited for w in wanted) and not cmdline.conflicts(edited, wanted)
    # only conflicting tokens go, only wanted ones come, nothing is duplicated
    gone, came = Counter(tokens) - Counter(edited), Counter(edited) - Counter(tokens)
    assert set(gone) <= set(cmdline.conflicts(tokens, wanted)) and set(came) <= set(wanted)
    assert all(count == 1 for count in came.values())
    assert unedited_tokens(edited, edit) == tokens
    assert cmdline.plan(edited, wanted, replace=False).empty
    assert cmdline.Edit.from_json(edit.to_json()) == edit


@given(TOKENS, WANTED)
def test_without_replace_a_conflict_is_refused_and_nothing_else_is(tokens, wanted):
    if cmdline.conflicts(tokens, wanted):
        with pytest.raises(SeatError, match="--replace"):
            cmdline.plan(tokens, wanted, replace=False)
    else:
        edit = cmdline.plan(tokens, wanted, replace=False)
        assert not edit.replaced and edited_tokens(tokens, edit)[: len(tokens)] == tokens


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


def refused(host, text, profile="paper", choices=ACK):
    plan = make_plan(host, profile, choices)
    assert any(text in r for r in plan.refusals), plan.refusals
    return plan


def test_a_plan_made_before_another_change_is_refused_at_apply(tmp_path):
    host = FakeHost(tmp_path, "grub", driver="590.44.01")
    paper, conservative = make_plan(host), make_plan(host, "conservative", host_plan.Choices())
    change.apply(paper, host.system)
    tree = host.tree()
    with pytest.raises(SeatError, match="host changed since this plan was made") as caught:
        change.apply(conservative, host.system)
    assert "applied in this boot" in str(caught.value) and host.tree() == tree


def test_a_tool_that_always_fails_is_recorded_once_and_recover_terminates_with_the_fix(tmp_path):
    host = FakeHost(tmp_path, "grub")
    pristine = host.tree()
    plan = make_plan(host)
    broken = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash\n'

    def break_defaults(at):  # the defaults break between plan and update-grub
        if at == "before update-grub":
            host.write("/etc/default/grub", broken)

    host.system.fault = break_defaults
    with pytest.raises(SeatError, match="update-grub") as caught:
        change.apply(plan, host.system)
    assert "seat host recover" in caught.value.hint
    host.system.fault = lambda at: None
    with pytest.raises(SeatError) as caught:
        change.recover(host.system)
    text = str(caught.value)
    assert "/etc/default/grub does not parse" in text and "then run: update-grub" in text
    assert "Unterminated quoted string" in text or "unexpected EOF" in text
    journal = Journal(host.system)
    assert journal.open() == [] and len(journal.transactions()) == 2  # the apply and one rollback
    assert change.recover(host.system) == []  # it terminates: nothing is left to do
    assert len(journal.transactions()) == 2
    host.write(
        "/etc/default/grub",
        'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX=""\n',
    )
    host.run(["update-grub"])
    assert host.tree() == pristine


@pytest.mark.parametrize("where", ["/etc/default/grub", "/etc/default/grub.d/40-site.cfg"])
def test_plan_refuses_defaults_that_do_not_parse_as_grub_mkconfig_sources_them(tmp_path, where):
    host = FakeHost(tmp_path, "grub")
    host.write(where, 'GRUB_CMDLINE_LINUX="quiet\n')
    tree = host.tree()
    refused(host, f"{where} does not parse as grub-mkconfig sources it")
    assert host.tree() == tree and host.changing_calls() == []


def test_tool_output_in_another_encoding_is_decoded_for_display_only():
    rc, output = system.run_real(["sh", "-c", r"printf 'Found Syst\350me\n'; exit 3"])
    assert rc == 3 and output == "Found Syst\ufffdme\n"


def test_a_symlinked_kernel_cmdline_is_refused_by_plan_before_anything_changes(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    real = host.path("/etc/kernel/cmdline.real")
    host.path("/etc/kernel/cmdline").rename(real)
    host.path("/etc/kernel/cmdline").symlink_to("cmdline.real")
    tree = host.tree()
    plan = refused(host, "/etc/kernel/cmdline is a symlink")
    with pytest.raises(SeatError, match="refused"):
        change.apply(plan, host.system)
    assert host.tree() == tree


def test_a_failure_half_way_names_recover(tmp_path):
    host = FakeHost(tmp_path, "grub")
    pristine = host.tree()
    plan = make_plan(host)

    def block(at):  # the drop-in folder turns into a file after the plan
        if at.startswith("written /etc/modprobe.d"):
            host.write("/etc/default/grub.d", "")

    host.system.fault = block
    with pytest.raises(SeatError, match="apply stopped half-way") as caught:
        change.apply(plan, host.system)
    assert "`seat host recover` undoes it" in caught.value.hint
    host.system.fault = lambda at: None
    host.path("/etc/default/grub.d").unlink()
    change.recover(host.system)
    assert host.tree() == pristine


def test_systemd_boot_entries_get_the_exact_bytes_and_rollback_gives_them_back(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    original = b'root=UUID=abc rw acpi_osi="Windows 2015"\tcaf\xe9=1\r\n'
    host.path("/etc/kernel/cmdline").write_bytes(original)
    host.run(["kernel-install", "add", KVER, "x"])
    pristine = host.tree()
    shown = json.dumps(host_plan.to_json(make_plan(host), host.system))  # the diff shows, for display
    assert '+root=UUID=abc rw acpi_osi=\\"Windows 2015\\"\\tcaf\\ufffd=1 iommu=off' in shown
    apply(host)
    assert host.path("/etc/kernel/cmdline").read_bytes() == original[:-2] + b" iommu=off amd_iommu=off\r\n"
    entry = host.path(f"/boot/efi/loader/entries/{MACHINE}-{KVER}.conf").read_bytes()
    assert b'acpi_osi="Windows 2015" caf\xe9=1 iommu=off amd_iommu=off\n' in entry
    change.rollback(host.system)
    assert host.tree() == pristine


@pytest.mark.parametrize(
    "field, value",
    [
        ("tokens", "{amd: ['amd_iommu=off$(touch X)'], intel: [iommu=off]}"),
        ("tokens", "{amd: ['iommu=off\"; touch X; \"'], intel: [iommu=off]}"),
        ("tokens", "{amd: ['a b'], intel: [iommu=off]}"),
        ("tokens", "{amd: ['iommu=off;reboot'], intel: [iommu=off]}"),  # GRUB's script ends the command at ;
    ],
)
def test_profile_tokens_follow_kernel_parameter_syntax_and_nothing_runs(tmp_path, field, value):
    path = tmp_path / "evil.yaml"
    path.write_text(
        f"description: x\niommu: {{mode: passthrough, {field}: {value}}}\n"
        "registry: three-key\nrebar: {min_bar1_fraction_of_vram: 1.0}\nhmm_disabled: true\n"
        "sources: [x]\n"
    )
    with pytest.raises(SeatError, match="not a plain kernel parameter"):
        host_profiles.load(str(path))


def test_registry_strings_are_module_option_syntax():
    with pytest.raises(ValueError, match="not a plain module option value"):
        host_profiles.Form(dwords='ForceP2P=1" ; touch X; "', sources=["x"])


def test_a_deleted_backups_folder_gets_a_clear_message_and_forget_is_the_way_out(tmp_path):
    import shutil

    host = FakeHost(tmp_path, "systemd-boot")
    txid = apply(host)
    shutil.rmtree(host.path("/var/lib/seatkit/host/backups"))
    tree = host.tree()
    with pytest.raises(SeatError, match="backup .* is missing or damaged") as caught:
        change.rollback(host.system)
    assert f"seat host forget {txid}" in caught.value.hint and "nothing was changed" in str(caught.value)
    assert host.tree() == tree and Journal(host.system).open() == []
    change.forget(host.system, txid)
    assert Journal(host.system).active() == [] and Journal(host.system).open() == []


def test_a_later_drop_in_is_caught_by_plan(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.write("/etc/default/grub.d/zz-site.cfg", 'GRUB_CMDLINE_LINUX_DEFAULT="quiet console=ttyS0"\n')
    refused(host, "/etc/default/grub.d/zz-site.cfg sets GRUB_CMDLINE_LINUX_DEFAULT")


def test_a_later_drop_in_that_appears_during_apply_rolls_the_transaction_back(tmp_path):
    host = FakeHost(tmp_path, "grub")
    plan = make_plan(host)
    site = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet console=ttyS0"\n'

    def sneak_in(at):
        if at == "before update-grub":
            host.write("/etc/default/grub.d/zz-site.cfg", site)

    host.system.fault = sneak_in
    with pytest.raises(SeatError, match="does not carry the change") as caught:
        change.apply(plan, host.system)
    assert "zz-site.cfg sets GRUB_CMDLINE_LINUX_DEFAULT" in str(caught.value)
    assert "iommu=off is missing" in str(caught.value) or "lacks iommu=off" in str(caught.value)
    journal = Journal(host.system)
    assert journal.active() == [] and journal.open() == []
    assert not host.path(ops.GRUB_DROPIN).exists() and not host.path(ops.MODPROBE_FILE).exists()
    assert "iommu=off" not in host.read("/boot/grub/grub.cfg")


def test_a_pending_edit_in_the_defaults_is_judged(tmp_path):
    host = FakeHost(tmp_path, "grub")
    defaults = host.read("/etc/default/grub").replace(
        'GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="iommu=pt"'
    )
    host.write("/etc/default/grub", defaults)  # update-grub not yet run: grub.cfg does not show it
    refused(host, "already has iommu=pt")


def test_a_hand_written_loader_entry_is_refused_with_the_reason(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    host.write("/boot/efi/loader/entries/rescue.conf", "title rescue\nlinux /vmlinuz\noptions root=x\n")
    refused(host, "rescue.conf: they would keep booting the old command line")


def test_folders_apply_created_go_on_rollback(tmp_path):
    host = FakeHost(tmp_path, "grub")
    assert not host.path("/etc/default/grub.d").exists()
    pristine = host.tree()
    apply(host)
    assert host.path("/etc/default/grub.d").is_dir()
    change.rollback(host.system)
    assert not host.path("/etc/default/grub.d").exists() and host.tree() == pristine


def test_a_temp_file_left_by_a_kill_is_cleaned_by_the_next_apply(tmp_path):
    host = FakeHost(tmp_path, "grub")
    stale = host.path("/etc/modprobe.d/.seatkit-nvidia.conf.seatkit~abc123")
    stale.write_text("half")
    apply(host)
    assert not stale.exists()


def test_extended_attributes_are_kept_on_rewrite(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    target = host.path("/etc/kernel/cmdline")
    os.setxattr(target, "user.label", b"system_u:object_r:etc_t")
    pristine = host.tree()
    apply(host)
    assert os.getxattr(target, "user.label") == b"system_u:object_r:etc_t"
    change.rollback(host.system)
    assert host.tree() == pristine


def test_an_attribute_that_cannot_be_copied_is_refused_with_the_reason(tmp_path, monkeypatch):
    host = FakeHost(tmp_path, "systemd-boot")
    os.setxattr(host.path("/etc/kernel/cmdline"), "user.label", b"x")

    def denied(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "setxattr", denied)
    with pytest.raises(SeatError, match="extended attribute user.label.*Operation not permitted"):
        host.system.write("/etc/kernel/cmdline", b"x\n")
    assert host.read("/etc/kernel/cmdline").startswith("root=UUID=abc")
    assert not list(host.root.glob("etc/kernel/.*"))  # no temp file either


def test_a_hand_edit_to_a_kernel_install_entry_survives_apply_and_rollback(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    entry = host.path(f"/boot/efi/loader/entries/{MACHINE}-{KVER}.conf")
    entry.write_bytes(entry.read_bytes() + b"sort-key arch\n")  # kernel-install would not write this
    pristine = host.tree()
    apply(host)
    assert b"iommu=off" in entry.read_bytes()
    change.rollback(host.system)
    assert host.tree() == pristine


def test_dracut_without_hostonly_is_warned_that_modprobe_d_stays_out_of_the_image(tmp_path):
    host = FakeHost(tmp_path, "grub", initramfs=("dracut",))
    assert any("non-hostonly" in w for w in make_plan(host).warnings)
    host.write("/etc/dracut.conf.d/50-hostonly.conf", 'hostonly="yes"\n')
    assert not any("non-hostonly" in w for w in make_plan(host).warnings)


def test_output_printed_by_a_defaults_file_is_not_read_as_command_line(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.write("/etc/default/grub", host.read("/etc/default/grub") + "echo iommu=off amd_iommu=off\n")
    plan = make_plan(host)
    assert "iommu=off" in plan.edit.added, plan.edit  # an echo is not an assignment


def test_a_defaults_file_that_never_ends_is_stopped_with_a_clear_error(tmp_path, monkeypatch):
    from seatkit.host import grub_defaults

    monkeypatch.setattr(grub_defaults, "TIMEOUT", 2)
    host = FakeHost(tmp_path, "grub")
    host.write("/etc/default/grub.d/slow.cfg", "sleep 600\n")  # a child that keeps the pipes open
    refused(host, "sourcing the GRUB defaults did not finish in 2 s")


def test_a_forget_killed_half_way_is_finished_by_recover(tmp_path):
    import shutil

    from fake_host import Death

    host = FakeHost(tmp_path, "systemd-boot")
    txid = apply(host)
    shutil.rmtree(host.path("/var/lib/seatkit/host/backups"))

    def die(at):
        if at == "before commit":
            raise Death(at)

    host.system.fault = die
    with pytest.raises(Death):
        change.forget(host.system, txid)
    host.system.fault = lambda at: None
    change.recover(host.system)
    journal = Journal(host.system)
    assert journal.open() == [] and journal.active() == []


def test_a_tool_that_hangs_is_a_failed_step_not_a_traceback(monkeypatch):
    monkeypatch.setattr(system, "TOOL_TIMEOUT", 1)
    rc, output = system.run_real(["sh", "-c", "echo working; exec sleep 60"])
    assert rc == 124 and "working" in output and "sh: stopped after 1 s" in output


def test_a_full_disk_during_rollback_names_recover_and_recover_finishes(tmp_path, monkeypatch):
    import errno

    host = FakeHost(tmp_path, "systemd-boot")
    pristine = host.tree()
    apply(host)
    write = system.System.write

    def full(self, path, data, mode=0o644):
        if "/backups/" not in path:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return write(self, path, data, mode)

    monkeypatch.setattr(system.System, "write", full)
    with pytest.raises(SeatError, match="rollback stopped half-way: .*No space left") as caught:
        change.rollback(host.system)
    assert "seat host recover" in caught.value.hint
    monkeypatch.setattr(system.System, "write", write)
    change.recover(host.system)
    journal = Journal(host.system)
    assert journal.open() == [] and journal.active() == [] and host.tree() == pristine


def test_a_dangling_grub_d_link_is_skipped_as_grub_mkconfig_skips_it(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.path("/etc/default/grub.d").mkdir(parents=True, exist_ok=True)
    host.path("/etc/default/grub.d/50-gone.cfg").symlink_to("/nonexistent.cfg")
    plan = make_plan(host)
    assert plan.refusals == [] and plan.ops


def test_a_defaults_file_that_exits_is_refused_by_plan(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.write("/etc/default/grub.d/50-stop.cfg", "exit 0\n")
    refused(host, "a file calls `exit`")


def test_a_killed_rollback_whose_backups_are_lost_ends_with_forget_then_recover(tmp_path):
    import shutil

    from fake_host import Death

    host = FakeHost(tmp_path, "systemd-boot")
    txid = apply(host)

    def die(at):
        if at.startswith("before kernel-install"):
            raise Death(at)

    host.system.fault = die
    with pytest.raises(Death):
        change.rollback(host.system)
    host.system.fault = lambda at: None
    shutil.rmtree(host.path("/var/lib/seatkit/host/backups"))
    with pytest.raises(SeatError, match="missing or damaged") as caught:
        change.recover(host.system)
    assert f"seat host forget {txid}" in caught.value.hint
    change.forget(host.system, txid)
    change.recover(host.system)  # the rollback cut short has nothing left to undo: it is closed
    journal = Journal(host.system)
    assert journal.open() == [] and journal.active() == []


def test_dracut_reads_its_conf_d_folders_as_one_list_sorted_by_file_name(tmp_path):
    host = FakeHost(tmp_path, "grub", initramfs=("dracut",))
    host.write("/etc/dracut.conf.d/10-hostonly.conf", 'hostonly="yes"\n')
    host.write("/usr/lib/dracut/dracut.conf.d/99-generic.conf", 'hostonly="no"\n')  # read last: it wins
    assert any("non-hostonly" in w for w in make_plan(host).warnings)
    host.write("/etc/dracut.conf.d/99-generic.conf", 'hostonly="yes"\n')  # /etc's file of that name instead
    assert not any("non-hostonly" in w for w in make_plan(host).warnings)


def test_replace_leaves_the_recovery_entries_command_line_alone(tmp_path):
    host = FakeHost(tmp_path, "grub", cmdline="quiet")
    host.write("/etc/default/grub", host.read("/etc/default/grub").replace('LINUX=""', 'LINUX="iommu=pt"'))
    host.update_grub()
    plan = make_plan(host, choices=host_plan.Choices(replace=True, acknowledge_iommu_off=True))
    assert any("iommu=pt is in GRUB_CMDLINE_LINUX" in r and "recovery" in r for r in plan.refusals)
    dropin = boot_stacks.grub_dropin(cmdline.Edit(added=("iommu=off",), replaced=((1, "iommu=pt"),)))
    assert 'GRUB_CMDLINE_LINUX="' not in dropin  # only _DEFAULT, which recovery entries do not get


def test_a_rollback_syncs_the_boot_files_before_it_commits(tmp_path, monkeypatch):
    """A power cut right after the commit must not find grub.cfg as apply left it: each file
    system the boot files live on is synced after the last boot file is rewritten, before commit."""
    host = FakeHost(tmp_path, "grub")
    apply(host)
    events = []
    monkeypatch.setattr(system.System, "settle", lambda self: events.append("sync"))
    write, run = system.System.write, host.system.runner

    def writing(self, path, data, mode=0o644):
        events.append(f"write {path}")
        write(self, path, data, mode)

    def running(argv):
        events.append(f"run {argv[0]}")
        return run(argv)

    monkeypatch.setattr(system.System, "write", writing)
    host.system.runner = running
    append = change.Journal._append

    def journaling(self, record):
        if record["type"] == "commit":
            events.append("commit")
        append(self, record)

    monkeypatch.setattr(change.Journal, "_append", journaling)
    change.rollback(host.system)
    last = max(
        i for i, e in enumerate(events) if e.startswith(("run update-grub", "write /boot", "write /etc"))
    )
    assert "sync" in events[last : events.index("commit")], events
