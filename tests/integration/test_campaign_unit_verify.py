"""The campaign's units, as the kit writes them, pass Debian's real `systemd-analyze verify`."""

from __future__ import annotations

import shutil
import subprocess

from conftest import unavailable

from seatkit.campaign import boot, unit
from seatkit.host.system import System


def test_the_resume_unit_and_its_fallback_pass_systemd_analyze_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        unavailable("systemd-analyze is not installed (apt-get install systemd)")
    seat = shutil.which("true")  # a root-owned program where the kit's own install would be
    (tmp_path / boot.UNIT_NAME).write_text(unit.unit_text(seat, folders=unit.import_folders()))
    (tmp_path / boot.FALLBACK_NAME).write_text(unit.fallback_text(System()))
    done = subprocess.run(
        [analyze, "verify", "--man=no", *(str(tmp_path / n) for n in (boot.UNIT_NAME, boot.FALLBACK_NAME))],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and seat in unit.unit_text(seat), done.stdout + done.stderr
    assert "seatkit" not in done.stderr, done.stderr  # no warning about either unit
