"""seatkit/image/what_mounts.py: the folders site-packages' .pth files put on sys.path are the
image's own (review4: a mount over an editable install's source tree, or a folder easy-install.pth
names, replaced packages the server imports while the outside check saw nothing)."""

from pathlib import PurePosixPath

from seatkit.image import what_loads, what_mounts
from seatkit.seat import what_runs
from seatkit.seat.sections import Image

VENV = "/opt/venv"
SITE = f"{VENV}/lib/python3.12/site-packages"
FILES = {
    "/etc/passwd": b"root:x:0:0:root:/root:/bin/bash\n",
    f"{VENV}/pyvenv.cfg": b"home = /usr/local/bin\n",
    f"{VENV}/bin/vllm": b"#!/opt/venv/bin/python\n",
    # `pip install -e /workspace/flashinfer` leaves this: the package is imported from there.
    f"{SITE}/__editable__.flashinfer_python-0.5.0.pth": b"/workspace/flashinfer\n",
    f"{SITE}/easy-install.pth": b"/opt/apex\n",
}


def _read(inside, path, hops=8):
    return FILES.get(str(what_runs.where(path)))


def _names(inside, folder):
    prefix = str(what_runs.where(folder)).rstrip("/") + "/"
    return sorted({p[len(prefix) :].split("/")[0] for p in FILES if p.startswith(prefix)})


def test_a_mount_over_a_folder_a_pth_file_puts_on_sys_path_is_refused(monkeypatch):
    for module in (what_mounts, what_loads):
        monkeypatch.setattr(module, "read", _read)
    monkeypatch.setattr(what_mounts, "names", _names)
    monkeypatch.setattr(what_mounts, "lands", lambda inside, path, hops=16: str(what_runs.where(path)))
    monkeypatch.setattr(what_mounts, "which", lambda inside, name, search: None)
    image = Image(name="x", tag="y", vllm_dir=f"{SITE}/vllm", b12x_dir=f"{SITE}/b12x")
    own = what_mounts.derived(None, {"PATH": "/usr/bin"}, "/usr/bin", "", "/", image, None)
    assert str(PurePosixPath(SITE)) in own  # site-packages itself is protected
    for target in ("/workspace/flashinfer", "/opt/apex"):
        found = what_mounts.mounts_land(
            None, {"docker.extra_mounts[0].target": target}, image.vllm_dir, image.b12x_dir, own, "/"
        )
        assert found and "puts on sys.path" in found[0], found
