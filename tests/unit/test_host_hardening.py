"""`seat host` on odd hosts, after crashes and against each other (issue 11)."""

from __future__ import annotations

import json
import multiprocessing
import os
import re

import pytest
from fake_host import KVER, MACHINE, FakeHost
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from seatkit import flock
from seatkit.errors import SeatError
from seatkit.host import change, cmdline, lock, ops, state, status, system
from seatkit.host import plan as host_plan
from seatkit.host.journal import JOURNAL, Journal
from seatkit.seat import host_profiles

ACK = host_plan.Choices(acknowledge_iommu_off=True)


pytestmark = pytest.mark.usefixtures("no_nvml")


def make_plan(host, profile="paper", choices=ACK):
    return host_plan.build(host_profiles.load(profile), host.system, choices)


def apply(host, profile="paper", choices=ACK):
    return change.apply(make_plan(host, profile, choices), host.system)


def refused(host, text, profile="paper", choices=ACK):
    plan = make_plan(host, profile, choices)
    assert any(text in r for r in plan.refusals), plan.refusals
    return plan


# --- one change at a time -----------------------------------------------------------------------


def _apply_in_child(host, profile, choices, start, release, results):
    plan = make_plan(host, profile, choices)
    host.system.fault = lambda at: release.wait(60) if at == "before update-initramfs" else None
    start.wait(60)
    try:
        results.put(("applied", change.apply(plan, host.system)))
    except SeatError as exc:
        results.put(("refused", str(exc)))


def test_two_applies_started_together_leave_exactly_one_acting(tmp_path):
    host = FakeHost(tmp_path, "grub", driver="590.44.01")
    pristine = host.tree()
    ctx = multiprocessing.get_context("fork")
    start, release, results = ctx.Barrier(2), ctx.Event(), ctx.Queue()
    children = [
        ctx.Process(target=_apply_in_child, args=(host, p, c, start, release, results))
        for p, c in (("paper", ACK), ("conservative", host_plan.Choices()))
    ]
    for child in children:
        child.start()
    first = results.get(timeout=120)  # the loser reports while the winner waits inside its apply
    release.set()
    second = results.get(timeout=120)
    for child in children:
        child.join(60)
    (winner,), (loser,) = ([r for r in (first, second) if r[0] == kind] for kind in ("applied", "refused"))
    assert first[0] == "refused"
    # The holder is named once it has written its name; a loser that comes in between says so.
    assert re.search(
        r"another host change is running: (pid \d+ \(seat host apply (paper|conservative)"
        r"|a process that has not yet written its name)",
        loser[1],
    ), loser[1]
    (active,) = Journal(host.system).active()
    assert active.txid == winner[1]
    module = host.read(ops.MODPROBE_FILE)  # one profile's files, not a mix of both
    dropin = host.read(ops.GRUB_DROPIN)
    assert ("RMForceP2PType" in module) == ("iommu=off" in dropin) == (active.begin["profile"] == "paper")
    change.rollback(host.system)
    assert host.tree() == pristine


def test_a_plan_made_before_another_change_is_refused_at_apply(tmp_path):
    host = FakeHost(tmp_path, "grub", driver="590.44.01")
    paper, conservative = make_plan(host), make_plan(host, "conservative", host_plan.Choices())
    change.apply(paper, host.system)
    tree = host.tree()
    with pytest.raises(SeatError, match="host changed since this plan was made") as caught:
        change.apply(conservative, host.system)
    assert "applied in this boot" in str(caught.value) and host.tree() == tree


def test_status_and_plan_work_while_the_lock_is_held_and_changes_are_refused(tmp_path):
    host = FakeHost(tmp_path, "grub")
    txid = apply(host)
    with lock.held(host.system, "apply paper"):
        assert status.status(host_profiles.load("paper"), host.system)["transactions"]["in_force"]
        assert make_plan(host, "conservative", host_plan.Choices()).profile == "conservative"
        for act in (
            lambda: change.rollback(host.system),
            lambda: apply(host),
            lambda: change.forget(host.system, txid),
        ):
            with pytest.raises(
                SeatError,
                match=rf"another host change is running: pid {os.getpid()} "
                r"\(seat host apply paper, since",
            ):
                act()
    assert Journal(host.system).active()[0].txid == txid


# --- a journal that survives a crash ------------------------------------------------------------


def test_a_torn_last_line_is_an_interrupted_step_and_every_command_still_works(tmp_path):
    host = FakeHost(tmp_path, "grub")
    pristine = host.tree()
    apply(host)
    journal = host.path(JOURNAL)
    data = journal.read_bytes()
    journal.write_bytes(data[:-12])  # the commit record cut short, as a crash or a full disk does
    assert status.status(host_profiles.load("paper"), host.system)["transactions"]["interrupted"]
    assert any("interrupted" in r for r in make_plan(host).refusals)
    with pytest.raises(SeatError, match="recover"):
        change.rollback(host.system)
    assert len(change.recover(host.system)) == 1
    assert host.tree() == pristine and Journal(host.system).open() == []
    assert all(json.loads(line) for line in journal.read_bytes().splitlines())


def test_a_damaged_line_in_the_middle_is_named(tmp_path):
    host = FakeHost(tmp_path, "grub")
    apply(host)
    journal = host.path(JOURNAL)
    lines = journal.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"tx": "x", "type": \n'
    journal.write_bytes(b"".join(lines))
    for act in (
        lambda: make_plan(host),
        lambda: change.recover(host.system),
        lambda: status.status(host_profiles.load("paper"), host.system),
    ):
        with pytest.raises(SeatError, match=r"journal.jsonl line 3 is damaged"):
            act()


# --- recovery terminates; plan catches what apply would hit -------------------------------------


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


# --- bytes the kit does not own -----------------------------------------------------------------

PIECES = st.sampled_from(
    [
        b"quiet",
        b"ro",
        b"root=UUID=abc",
        b'acpi_osi="Windows 2015"',
        b"iommu=pt",
        b"amd_iommu=on",
        b"caf\xe9=1",
        b"\xff\xfe",
        b'x="a\tb"',
        b"splash",
        b"console=ttyS0,115200n8",
        b"iommu=off",
    ]
)
SEPARATORS = st.sampled_from([b" ", b"  ", b"\t", b" \t "])
ENDINGS = st.sampled_from([b"", b"\n", b"\r\n", b" \n", b"\t\r\n"])


@st.composite
def hostile_lines(draw):
    words = draw(st.lists(PIECES, max_size=12)) + [
        b"p%d=v" % i for i in range(draw(st.sampled_from([0, 0, 150])))
    ]
    out = draw(st.sampled_from([b"", b" ", b"\t"]))
    for word in words:
        out += word + draw(SEPARATORS)
    return out.rstrip(b" \t") + draw(ENDINGS)


@hyp_settings(max_examples=300, deadline=None)
@given(hostile_lines(), st.sampled_from([["iommu=off", "amd_iommu=off"], ["iommu=pt"]]))
def test_token_edits_keep_every_byte_they_do_not_own(line, wanted):
    tokens = cmdline.split(line)
    edit = cmdline.plan(tokens, wanted, replace=True)
    out = cmdline.edit_bytes(line, edit)
    assert cmdline.split(out) == cmdline.apply(tokens, edit)
    trailing = line[cmdline.spans(line)[-1][1] :] if tokens else line
    assert out.endswith(trailing)  # the newline, CRLF or tabs at the end stay
    if not edit.replaced:  # nothing removed: the old bytes are all there, ours appended after them
        added = " ".join(edit.added).encode()
        cut = len(line) - len(trailing)
        assert out == (line[:cut] + (b" " if tokens and added else b"") + added + trailing)
    kept = [line[s:e] for i, (s, e) in enumerate(cmdline.spans(line)) if i not in dict(edit.replaced)]
    assert [out[s:e] for s, e in cmdline.spans(out)][: len(kept)] == kept
    assert cmdline.plan(cmdline.split(out), wanted, replace=False).empty


def test_kernel_quoting_keeps_quoted_values_whole():
    assert cmdline.split(b'a acpi_osi="Windows 2015"\tb="x y"z c') == [
        "a",
        'acpi_osi="Windows 2015"',
        'b="x y"z',
        "c",
    ]
    with pytest.raises(SeatError, match="unbalanced double quote"):
        cmdline.edit_bytes(b'root=x foo="open\n', cmdline.Edit(("iommu=pt",)))


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


@pytest.mark.parametrize("stack", ["grub", "systemd-boot"])
def test_a_command_line_past_2047_bytes_is_refused_with_its_length(tmp_path, stack):
    long = " ".join(f"param{i}=value{i}" for i in range(150))
    host = FakeHost(tmp_path, stack, cmdline=long)
    plan = make_plan(host)
    (reason,) = [r for r in plan.refusals if "COMMAND_LINE_SIZE" in r]
    assert re.search(r"would be 2\d{3} bytes; the kernel keeps 2047", reason)
    assert not make_plan(FakeHost(tmp_path / "short", stack, cmdline=long[:1500])).refusals


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


# --- written is not applied ---------------------------------------------------------------------


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


def test_status_reads_loader_entries_under_efi(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    for entry in host.root.glob("boot/efi/loader/entries/*.conf"):
        entry.unlink()
    host.path("/etc/kernel/cmdline").unlink()
    host.write(
        f"/efi/loader/entries/{MACHINE}-{KVER}.conf", "title x\noptions root=x iommu=off amd_iommu=off\n"
    )
    reading = state.configured_cmdline(host.system)
    assert reading.value == {"iommu=off", "amd_iommu=off"}
    assert reading.source == f"/efi/loader/entries/{MACHINE}-{KVER}.conf"


# --- nothing left behind ------------------------------------------------------------------------


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


# --- review: hostile defaults files, the lock file, a killed forget -----------------------------


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


def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path):
    host = FakeHost(tmp_path / "root", "grub")
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    host.path(lock.LOCK).parent.mkdir(parents=True, exist_ok=True)
    host.path(lock.LOCK).symlink_to(victim)
    with pytest.raises(SeatError, match="lock"):
        apply(host)
    assert victim.read_text() == "precious\n"


def test_a_lock_that_cannot_be_opened_is_a_clear_error(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.path(lock.LOCK).mkdir(parents=True)  # a folder where the lock file goes
    with pytest.raises(SeatError, match="lock"):
        apply(host)


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


def test_a_journal_that_cannot_be_read_or_written_is_a_clear_error_not_an_empty_journal(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.path(JOURNAL).mkdir(parents=True)  # a folder in its place
    with pytest.raises(SeatError, match="cannot read .*journal.jsonl"):
        Journal(host.system).open()
    with pytest.raises(SeatError, match="cannot (read|write) .*journal.jsonl"):
        apply(host)
    with pytest.raises(SeatError, match="cannot write .*journal.jsonl"):
        Journal(host.system).append({"tx": "x", "type": "begin"})


def test_a_full_disk_at_the_lock_is_a_clear_error_and_changes_nothing(tmp_path, monkeypatch):
    import errno

    host = FakeHost(tmp_path, "grub")
    pristine = host.tree()

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(flock.os, "pwrite", full)
    monkeypatch.setattr(Journal, "_append", lambda self, record: full())
    with pytest.raises(SeatError, match="cannot write .*journal.jsonl: No space left on device"):
        apply(host)
    assert host.tree() == pristine and not host.changing_calls()


@pytest.mark.parametrize("odd", ["folder", "dangling symlink"])
def test_a_modprobe_conf_that_is_a_folder_or_dangling_link_is_skipped_as_kmod_does(tmp_path, odd):
    host = FakeHost(tmp_path, "grub")
    where = host.path("/etc/modprobe.d/odd.conf")
    where.mkdir() if odd == "folder" else where.symlink_to("/nonexistent/odd.conf")
    plan = make_plan(host)
    assert plan.refusals == [] and plan.ops
    assert status.status(host_profiles.load("paper"), host.system)["rows"]
    apply(host)
    change.rollback(host.system)
    assert where.is_dir() if odd == "folder" else where.is_symlink()


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
