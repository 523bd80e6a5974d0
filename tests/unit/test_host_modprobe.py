"""Module options as kmod resolves them: its folders in its order, a name masking the same name
later, and `module.option=value` on the kernel command line applied after every modprobe.d file."""

import pytest
from fake_host import FakeHost, apply, make_plan

from seatkit.host import change, cmdline, modprobe, status
from seatkit.host import plan as host_plan
from seatkit.seat import host_profiles

ACK = host_plan.Choices(acknowledge_iommu_off=True)


pytestmark = pytest.mark.usefixtures("no_nvml")


def refusals(host):
    return host_plan.build(host_profiles.load("paper"), host.system, ACK).refusals


def hmm(host):
    return next(
        r
        for r in status.status(host_profiles.load("paper"), host.system)["rows"]
        if r["setting"] == "hmm_disabled"
    )


def test_usr_local_lib_modprobe_d_is_searched(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.write("/usr/local/lib/modprobe.d/zz-local.conf", "options nvidia_uvm uvm_disable_hmm=0\n")
    assert any(
        r.startswith("/usr/local/lib/modprobe.d/zz-local.conf sets nvidia_uvm uvm_disable_hmm")
        for r in refusals(host)
    )


def test_run_masks_the_same_name_in_usr_lib_and_usr_local_lib(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.write("/usr/lib/modprobe.d/hmm.conf", "options nvidia_uvm uvm_disable_hmm=0\n")
    host.write("/usr/local/lib/modprobe.d/hmm.conf", "options nvidia_uvm uvm_disable_hmm=0\n")
    host.write("/run/modprobe.d/hmm.conf", "options nvidia_uvm uvm_disable_hmm=1\n")
    assert modprobe.options(host.system, "nvidia_uvm") == (
        {"uvm_disable_hmm": "1"},
        ["/run/modprobe.d/hmm.conf"],
    )


@pytest.mark.parametrize("token", ["nvidia_uvm.uvm_disable_hmm=0", "nvidia-uvm.uvm_disable_hmm=0"])
def test_a_module_option_on_the_kernel_command_line_is_refused_by_plan(tmp_path, token):
    host = FakeHost(tmp_path, "grub", cmdline=f"quiet {token}")
    assert any(
        "has nvidia_uvm.uvm_disable_hmm=0, which kmod applies after every modprobe.d file" in r
        for r in refusals(host)
    )


def test_status_judges_the_value_kmod_resolves_with_the_next_boots_command_line(tmp_path):
    host = FakeHost(tmp_path, "grub")
    change.apply(host_plan.build(host_profiles.load("paper"), host.system, ACK), host.system)
    host.reboot()
    assert hmm(host)["verdict"] == "OK"
    host.write(
        "/etc/default/grub.d/50-hmm.cfg",
        'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX nvidia_uvm.uvm_disable_hmm=0"\n',
    )
    host.run(["update-grub"])
    row = hmm(host)  # the next boot's line wins over the kit's file
    assert row["configured"] is False and row["verdict"] == "REVERTS"
    assert row["why"].startswith("reverts at the next boot (or module reload): ")
    assert row["configured_from"].endswith(modprobe.KERNEL_LINE)
    host.reboot()
    assert hmm(host)["live"] is False and hmm(host)["verdict"] == "DRIFT"


@pytest.mark.parametrize(
    "line",
    [
        "install nvidia_uvm /sbin/modprobe --ignore-install nvidia_uvm uvm_disable_hmm=0",
        "install nvidia-uvm \\\n  /sbin/modprobe --ignore-install nvidia-uvm $CMDLINE_OPTS uvm_disable_hmm=0",
    ],
)
def test_an_install_command_that_passes_the_option_itself_is_refused(tmp_path, line):
    """kmod runs an `install` command instead of loading the module: words it passes come after the
    files' options (uvm_disable_hmm=1 uvm_disable_hmm=0), so the command's value wins."""
    host = FakeHost(tmp_path, "grub")
    host.write("/etc/modprobe.d/operator.conf", f"# HMM back on for our tests\n{line}\n")
    assert any(
        r.startswith(
            "/etc/modprobe.d/operator.conf has an install command for nvidia_uvm that passes uvm_disable_hmm"
        )
        for r in refusals(host)
    ), refusals(host)


def test_an_install_command_that_only_passes_cmdline_opts_is_not_refused(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.write(
        "/etc/modprobe.d/operator.conf",
        "install nvidia_uvm /sbin/modprobe --ignore-install nvidia_uvm $CMDLINE_OPTS\n",
    )
    assert not any("install command" in r for r in refusals(host))


def test_modprobe_files_are_read_as_modprobe_does(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.write(
        "/etc/modprobe.d/sound.conf",
        'options snd_hda_intel model="open\n'
        '# a comment with "quote\n'
        "options nvidia_uvm \\\n   uvm_perf_prefetch=0\n",
    )
    options, files = modprobe.options(host.system, "nvidia_uvm")
    assert options == {"uvm_perf_prefetch": "0"} and files == ["/etc/modprobe.d/sound.conf"]
    assert status.status(host_profiles.load("paper"), host.system)["rows"]
    change.apply(host_plan.build(host_profiles.load("paper"), host.system, ACK), host.system)
    host.reboot()
    assert {
        r["setting"]: r["verdict"] for r in status.status(host_profiles.load("paper"), host.system)["rows"]
    }["registry_keys"] == "OK"


def test_quoted_module_option_values_lose_only_their_quotes():
    lines = modprobe.lines('options nvidia NVreg_RegistryDwords="A=1;B=2" x="a b"\n')
    assert lines == [(1, ["options", "nvidia", 'NVreg_RegistryDwords="A=1;B=2" x="a b"'])]
    assert [cmdline.value(t) for t in cmdline.split(lines[0][1][2])] == ["A=1;B=2", "a b"]


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
