"""Rollback acts on the host as it is at rollback time: kernels installed or removed since apply,
a `dnf upgrade` on a BLS host, an operator's hand edit to a loader entry; and it proves the result."""

import pytest
from fake_host import KVER, MACHINE, FakeHost

from seatkit.errors import SeatError
from seatkit.host import change, undo
from seatkit.host import plan as host_plan
from seatkit.host.journal import Journal
from seatkit.seat import host_profiles

NEW = "6.8.0-50-generic"
ACK = host_plan.Choices(acknowledge_iommu_off=True)
OURS = ("iommu=off", "amd_iommu=off")


pytestmark = pytest.mark.usefixtures("no_nvml")


def apply(host):
    return change.apply(host_plan.build(host_profiles.load("paper"), host.system, ACK), host.system)


def carriers(host) -> list[str]:
    """Every boot line that still has a kit token, and every image that still has the kit's file,
    read from the tree itself (not from the kit's proof)."""
    out = [
        f"{path}: {line}"
        for path in host.root.glob("boot/**/*.conf")
        if "entries" in str(path)
        for line in path.read_text().splitlines()
        if line.startswith("options") and any(t in line.split() for t in OURS)
    ]
    out += [str(p) for p in host.root.glob("boot/initrd.img-*") if "seatkit-nvidia.conf" in p.read_text()]
    return out


def test_systemd_boot_a_kernel_installed_after_apply_loses_the_tokens_and_the_file(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    apply(host)
    host.install_kernel(NEW)  # its entry from /etc/kernel/cmdline, its image from modprobe.d: both ours
    assert len(carriers(host)) == 4
    change.rollback(host.system)
    assert carriers(host) == []
    assert "options root=UUID=abc rw quiet splash\n" in host.read(
        f"/boot/efi/loader/entries/{MACHINE}-{NEW}.conf"
    )


def test_systemd_boot_a_kernel_removed_after_apply_does_not_come_back(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    host.install_kernel(NEW)
    pristine_new = host.read(f"/boot/efi/loader/entries/{MACHINE}-{NEW}.conf")
    apply(host)
    host.remove_kernel(KVER)
    host.calls.clear()
    change.rollback(host.system)  # no dead entry, no kernel-install for a kernel that is gone
    assert not host.path(f"/boot/efi/loader/entries/{MACHINE}-{KVER}.conf").exists()
    assert ["kernel-install", "add", KVER, f"/usr/lib/modules/{KVER}/vmlinuz"] not in host.calls
    assert host.read(f"/boot/efi/loader/entries/{MACHINE}-{NEW}.conf") == pristine_new
    assert carriers(host) == []


def test_bls_a_dnf_upgrade_that_drops_an_entry_does_not_make_rollback_refuse(tmp_path):
    host = FakeHost(tmp_path, "bls")
    apply(host)
    host.install_kernel(NEW)  # the new entry takes /etc/kernel/cmdline: our tokens
    host.remove_kernel(KVER)  # dnf's installonly_limit dropped the oldest
    assert len(carriers(host)) == 2
    change.rollback(host.system)
    assert carriers(host) == []
    assert host.read("/etc/kernel/cmdline") == "root=UUID=abc ro quiet splash\n"
    assert not host.path(f"/boot/loader/entries/{MACHINE}-{KVER}.conf").exists()
    assert Journal(host.system).active() == []


@pytest.mark.parametrize("stack, folder", [("systemd-boot", "boot/efi"), ("bls", "boot")])
def test_a_hand_edit_to_a_loader_entry_after_apply_is_kept_without_the_tokens(tmp_path, stack, folder):
    host = FakeHost(tmp_path, stack)
    apply(host)
    entry = host.path(f"/{folder}/loader/entries/{MACHINE}-{KVER}.conf")
    text = entry.read_text().replace("title ", "title My ")
    entry.write_text(text.replace("\noptions ", "\noptions nvidia-drm.modeset=1 "))
    lines = []
    change.rollback(host.system, progress=lines.append)
    after = entry.read_text()
    assert "title My " in after and "nvidia-drm.modeset=1" in after
    assert not any(t in after.split() for t in OURS)
    assert any("edited since apply: the edit is kept" in line for line in lines)


def test_a_failed_proof_is_an_error_that_names_what_remains(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    applied = apply(host)
    # an operator's own entry, copied from the kit's: no kernel-install run regenerates it
    entry = host.read(f"/boot/efi/loader/entries/{MACHINE}-{KVER}.conf")
    host.write("/boot/efi/loader/entries/rescue.conf", entry.replace("title Arch", "title rescue"))
    with pytest.raises(SeatError, match=r"rescue.conf still carries iommu=off amd_iommu=off") as caught:
        change.rollback(host.system)
    assert f"transaction {applied} is rolled back" in caught.value.message  # the id apply printed
    assert Journal(host.system).active() == []


def test_the_proof_reads_every_image_and_names_one_that_keeps_the_file(tmp_path, monkeypatch):
    host = FakeHost(tmp_path, "grub")
    apply(host)
    host.install_kernel(NEW)
    build = host.initramfs  # `update-initramfs -u -k all` skips a kernel it does not track
    monkeypatch.setattr(host, "initramfs", lambda tool, version: version != NEW and build(tool, version))
    with pytest.raises(SeatError) as caught:
        change.rollback(host.system)
    assert caught.value.message.endswith(
        f"could still get seatkit's change:\n  - /boot/initrd.img-{NEW} still holds "
        "/etc/modprobe.d/seatkit-nvidia.conf"
    )
    assert f"initrd.img-{KVER}" not in caught.value.message


def test_a_hand_edit_the_kit_cannot_parse_is_kept_and_named_not_left_open(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    apply(host)
    entry = host.path(f"/boot/efi/loader/entries/{MACHINE}-{KVER}.conf")
    entry.write_text(entry.read_text().replace("\noptions ", '\noptions acpi_osi="Windows '))
    edited, lines = entry.read_text(), []
    change.rollback(host.system, progress=lines.append)  # the kernel reads the rest as one quoted value
    assert entry.read_text() == edited and Journal(host.system).open() == []
    assert any(
        "the edit is kept as it is (the command line has an unbalanced double quote" in line for line in lines
    )


def test_a_backup_image_nothing_boots_does_not_fail_the_proof(tmp_path):
    host = FakeHost(tmp_path, "grub")
    apply(host)
    image = host.path(f"/boot/initrd.img-{KVER}")
    host.path(f"/boot/initrd.img-{KVER}.bak").write_bytes(image.read_bytes())  # update-initramfs's backup
    change.rollback(host.system)
    assert "seatkit-nvidia.conf" not in image.read_text()


def test_no_room_to_keep_a_hand_edit_stops_rollback_before_anything_changes(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    txid = apply(host)
    entry = host.path(f"/boot/efi/loader/entries/{MACHINE}-{KVER}.conf")
    entry.write_text(entry.read_text().replace("title ", "title My "))
    host.write(f"/var/lib/seatkit/host/backups/{txid}/hand", "in the way\n")  # a file where a folder goes
    tree = host.tree()
    with pytest.raises(SeatError, match="cannot keep a copy of the loader entries edited since apply"):
        change.rollback(host.system)
    assert host.tree() == tree and [t.txid for t in Journal(host.system).active()] == [txid]


def test_a_kit_token_the_operator_put_in_their_own_grub_defaults_after_apply_is_theirs(tmp_path):
    """After apply the operator decides to keep amd_iommu=off in /etc/default/grub: rollback takes
    out only what the kit added, the token stays, and the proof does not call it the kit's."""
    host = FakeHost(tmp_path, "grub")
    apply(host)
    host.write(
        "/etc/default/grub",
        host.read("/etc/default/grub").replace('GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="amd_iommu=off"'),
    )
    change.rollback(host.system)
    lines = [line.split() for line in host.read("/boot/grub/grub.cfg").splitlines() if "linux\t" in line]
    assert all("amd_iommu=off" in words and "iommu=off" not in words for words in lines), lines
    assert Journal(host.system).active() == []


@pytest.mark.parametrize(
    "leftover", [f"{NEW}.dpkg-new", f"{KVER}.dpkg-bak", f"{KVER}.efi.signed", f"{KVER}~"]
)
def test_a_kernel_file_left_by_an_interrupted_upgrade_gets_no_loader_entry(tmp_path, leftover):
    """apt cut short leaves /boot/vmlinuz-X.dpkg-new: it is no installed kernel. An entry for it
    would sort newest and become systemd-boot's default, a kernel with no modules and no initrd."""
    host = FakeHost(tmp_path, "systemd-boot")
    apply(host)
    host.write(f"/boot/vmlinuz-{leftover}", "kernel image\n")
    host.calls.clear()
    change.rollback(host.system)
    assert not any(c[:2] == ["kernel-install", "add"] and c[2] == leftover for c in host.calls), host.calls
    assert not host.path(f"/boot/efi/loader/entries/{MACHINE}-{leftover}.conf").exists()
    assert carriers(host) == []


def test_bls_a_kit_token_one_entry_had_before_apply_is_kept_and_not_called_the_kits(tmp_path):
    """The operator's own rescue entry already had amd_iommu=off: grubby's undo takes it out of every
    entry, the backup puts it back, and the proof does not fail rollback over it."""
    host = FakeHost(tmp_path, "bls")
    rescue = f"/boot/loader/entries/{MACHINE}-rescue.conf"  # sorts after the kernel's entry
    host.write(rescue, f"title Rescue\nlinux /vmlinuz-{KVER}\noptions root=UUID=abc ro amd_iommu=off\n")
    before = host.read(rescue)
    apply(host)
    change.rollback(host.system)
    assert host.read(rescue) == before
    assert Journal(host.system).active() == []


def test_grub_a_custom_entry_with_a_kit_token_of_its_own_does_not_fail_the_proof(tmp_path):
    """/etc/grub.d/40_custom had an entry with amd_iommu=off before apply: grub-mkconfig copies it
    into every grub.cfg, so after rollback it is still there, and it is the operator's."""
    host = FakeHost(tmp_path, "grub")
    host.write(
        "/etc/grub.d/40_custom",
        "#!/bin/sh\nexec tail -n +3 $0\nmenuentry 'No IOMMU' {\n"
        f"\tlinux\t/boot/vmlinuz-{KVER} root=UUID=abc ro amd_iommu=off\n}}\n",
    )
    host.update_grub()
    apply(host)
    change.rollback(host.system)
    text = host.read("/boot/grub/grub.cfg")
    assert "ro amd_iommu=off\n" in text and "iommu=off amd_iommu=off" not in text
    assert Journal(host.system).active() == []


def test_a_regeneration_that_fails_at_rollback_still_names_what_remains(tmp_path):
    """/boot full: update-initramfs fails during rollback. The error gives the command to run and
    also what a boot would still get, read back as the proof reads it."""
    host = FakeHost(tmp_path, "grub")
    apply(host)
    host.failing = {"update-initramfs"}
    with pytest.raises(undo.RegenFailed) as failed:
        change.rollback(host.system)
    assert "then run: update-initramfs -u -k all" in failed.value.message
    assert f"/boot/initrd.img-{KVER} still holds /etc/modprobe.d/seatkit-nvidia.conf" in failed.value.message
