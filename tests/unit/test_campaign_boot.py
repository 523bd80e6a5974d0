"""seatkit/campaign/boot.py: the arms' boot entries copy the one the normal boot boots."""

from __future__ import annotations

import pytest
from campaign_harness import CampaignHost, FastDriver, drive, start, write_campaign

from seatkit.campaign import boot, runner
from seatkit.errors import SeatError

GRUB_CFG = """if [ "${next_entry}" ] ; then
   set default="${next_entry}"
   set next_entry=
   save_env next_entry
else
   set default="%s"
fi
menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-abc' {
\tlinux\t/boot/vmlinuz-6.12.9-amd64 root=UUID=abc ro quiet
}
submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-abc' {
\tmenuentry 'Debian GNU/Linux, with Linux 6.1.0-30-amd64' $menuentry_id_option 'gnulinux-6.1.0-30-amd64-advanced-abc' {
\t\tlinux\t/boot/vmlinuz-6.1.0-30-amd64 root=UUID=abc ro quiet
\t}
}
"""


@pytest.mark.parametrize(
    "default, saved, kernel",
    [
        ("0", None, "6.12.9"),
        ("${saved_entry}", None, "6.12.9"),
        ("${saved_entry}", "gnulinux-advanced-abc>gnulinux-6.1.0-30-amd64-advanced-abc", "6.1.0-30"),
        ("gnulinux-advanced-abc>gnulinux-6.1.0-30-amd64-advanced-abc", None, "6.1.0-30"),
        (
            "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.1.0-30-amd64",
            None,
            "6.1.0-30",
        ),
    ],
)
def test_the_arms_copy_the_entry_the_normal_boot_boots_not_the_first(tmp_path, default, saved, kernel):
    """An operator who pinned an older kernel (GRUB_DEFAULT=saved, or a submenu path) would have had
    every arm boot the newest one: another kernel, maybe without the NVIDIA module."""
    from campaign_harness import grubenv

    host = CampaignHost(tmp_path / "root")
    host.write("/boot/grub/grub.cfg", GRUB_CFG % default)
    host.path("/boot/grub/grubenv").write_bytes(grubenv({"saved_entry": saved} if saved else {}))
    body = boot.default_entry(host.system)
    assert body[0].startswith("menuentry ") and body[-1] == "}"
    assert f"vmlinuz-{kernel}" in body[1]


@pytest.mark.parametrize("default", ["gnulinux-gone", "1", "9"])
def test_a_default_that_names_no_entry_is_refused(tmp_path, default):
    """A name no entry has, an index at a submenu (not an entry), an index past the menu."""
    host = CampaignHost(tmp_path / "root")
    host.write("/boot/grub/grub.cfg", GRUB_CFG % default)
    with pytest.raises(SeatError, match="another kernel than the normal one"):
        boot.default_entry(host.system)


def test_a_saved_entry_set_before_is_kept_and_one_set_between_boots_is_not_undone(tmp_path):
    from campaign_harness import grubenv, read_env

    host = CampaignHost(tmp_path / "root")
    host.path("/boot/grub/grubenv").write_bytes(grubenv({"saved_entry": "Ubuntu"}))  # the operator's, before
    pristine = host.files()
    start(host, write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}]))
    assert drive(host, FastDriver(host))[-1] == "done"
    assert host.files() == pristine  # grub-reboot's next_entry gone, saved_entry as it was
    start(host, write_campaign(tmp_path, arms=[{"name": "hmm", "host": ["hmm"]}]))
    assert runner.step(host.system, FastDriver(host)) == "rebooting"
    host.boot()
    env = read_env(host.path("/boot/grub/grubenv").read_bytes())  # grub-set-default between boots
    host.path("/boot/grub/grubenv").write_bytes(grubenv({**env, "saved_entry": "Ubuntu (recovery mode)"}))
    assert host.run_unit(FastDriver(host)) == "rebooting"  # the end runs in the normal boot
    host.boot()
    assert host.run_unit(FastDriver(host)) == "done"
    assert read_env(host.path("/boot/grub/grubenv").read_bytes())["saved_entry"] == "Ubuntu (recovery mode)"


DUAL_BOOT_CFG = """if [ "${next_entry}" ] ; then
   set default="${next_entry}"
else
   set default="3"
fi
menuentry 'Ubuntu' --class ubuntu $menuentry_id_option 'gnulinux-simple-abc' {
\tlinux\t/boot/vmlinuz-6.8.0-45-generic root=UUID=abc ro quiet
}
submenu 'Advanced options for Ubuntu' $menuentry_id_option 'gnulinux-advanced-abc' {
\tmenuentry 'Ubuntu, with Linux 6.8.0-45-generic' $menuentry_id_option 'gnulinux-6.8.0-45-generic-advanced-abc' {
\t\tlinux\t/boot/vmlinuz-6.8.0-45-generic root=UUID=abc ro quiet
\t}
}
menuentry 'Windows Boot Manager (on /dev/nvme0n1p1)' --class windows $menuentry_id_option 'osprober-efi-1234' {
\tchainloader /efi/Microsoft/Boot/bootmgfw.efi
}
menuentry 'Ubuntu 6.1 (custom)' {
\tlinux\t/boot/vmlinuz-6.1.0-custom root=UUID=abc ro quiet
}
menuentry 'Ubuntu 6.5 (custom)' {
\tlinux\t/boot/vmlinuz-6.5.0-custom root=UUID=abc ro quiet
}
"""


def test_an_index_default_counts_every_top_level_entry_not_only_those_with_a_linux_line(tmp_path):
    """GRUB counts every top-level menuentry and submenu for GRUB_DEFAULT=N, a chainloader entry
    (os-prober's Windows) included. Reproduction: a dual-boot grub.cfg whose entries are Ubuntu,
    the Advanced submenu, Windows (chainloader, no linux line), 'Ubuntu 6.1 (custom)' and
    'Ubuntu 6.5 (custom)', with GRUB_DEFAULT=3: GRUB boots the 6.1 kernel, but the one reader
    (host.state.grub_default_entry) skips Windows when counting, so every arm would copy the 6.5
    entry and boot another kernel than the normal one (and `seat host status` read its line)."""
    host = CampaignHost(tmp_path / "root")
    host.write("/boot/grub/grub.cfg", DUAL_BOOT_CFG)
    body = boot.default_entry(host.system)
    assert body[0].startswith("menuentry 'Ubuntu 6.1 (custom)'")
    assert "vmlinuz-6.1.0-custom" in body[1]


def test_a_default_naming_an_entry_by_its_grub_id_option_is_found(tmp_path):
    """`menuentry 'T' --id X` is GRUB's own way to give an entry an id (a hand-written 40_custom
    entry uses it; update-grub writes $menuentry_id_option). Reproduction: such an entry and
    GRUB_DEFAULT=lts-kernel; the campaign's reader matched `--id` before the cut, the one reader
    (host.state.MENU) reads $menuentry_id_option alone, so the campaign is refused ("not a
    menuentry") on a host whose normal boot is exactly that entry."""
    cfg = (GRUB_CFG % "lts-kernel") + (
        "menuentry 'Debian LTS kernel' --class debian --id lts-kernel {\n"
        "\tlinux\t/boot/vmlinuz-6.1.0-lts root=UUID=abc ro quiet\n}\n"
    )
    host = CampaignHost(tmp_path / "root")
    host.write("/boot/grub/grub.cfg", cfg)
    body = boot.default_entry(host.system)
    assert "vmlinuz-6.1.0-lts" in body[1]
