"""seatkit/image/container_files.py: a Snapshot answers stat and read below its folder as the
engine does, from one archive of it (the outside check asked the engine a dozen times a locked
file: about five minutes a check on the real vLLM CPU image), and asks the engine what it cannot
answer for the same way (the fake engine of test_outside_check)."""

import pytest
from test_outside_check import Client

from seatkit.image import container_files
from seatkit.image.container_files import Snapshot, is_dir, read, stat

ROOT = "/opt/venv/lib/python3.11/site-packages/vllm"
FILES = {
    f"{ROOT}/__init__.py": b"",
    f"{ROOT}/version.py": b"__version__ = '0.32'\n",
    f"{ROOT}/__pycache__/version.cpython-311.pyc": b"\x00" * 16,
    f"{ROOT}/big.so": b"x" * 64,
    f"{ROOT}/linked.py": ("link", "version.py"),
    f"{ROOT}/away": ("link", "/etc"),  # a folder reached through a link: the engine's to resolve
    f"{ROOT}/out.py": ("link", "/etc/hostname"),
    "/etc/hostname": b"host\n",
    "/etc/passwd": b"root:x:0:0::/root:/bin/sh\n",
}
PATHS = [
    ROOT,
    *FILES,
    f"{ROOT}/missing.py",
    f"{ROOT}/__pycache__",
    f"{ROOT}/__pycache__/other.pyc",
    f"{ROOT}/away/passwd",
    f"{ROOT}/../vllm/version.py",
    f"{ROOT}/nothing/below.py",
]


@pytest.fixture
def container(monkeypatch):
    monkeypatch.setattr(container_files, "SNAPSHOT_FILE", 32)  # big.so is read from the engine
    client = Client({"img": ("sha256:" + "a" * 64, {}, FILES)})
    return client.create("img")


def seen(found):
    return None if found is None else (is_dir(found), found.get("linkTarget") or "")


@pytest.mark.parametrize("path", PATHS)
def test_a_snapshot_answers_as_the_engine_does(container, path):
    snapshot = Snapshot(container, ROOT)
    assert seen(stat(snapshot, path)) == seen(stat(container, path))
    for hops in (0, 8):
        if is_dir(stat(container, path)):  # the engine's archive of a folder starts with the folder
            assert read(snapshot, path, hops) is None  # (the fake's has no folder entries)
        else:
            assert read(snapshot, path, hops) == read(container, path, hops)


def test_the_folder_is_read_once_and_only_what_it_cannot_answer_is_asked(container):
    snapshot = Snapshot(container, ROOT)
    assert container.read == [ROOT]
    for name in ("__init__.py", "version.py", "__pycache__/version.cpython-311.pyc", "missing.py"):
        read(snapshot, f"{ROOT}/{name}", 0)
        stat(snapshot, f"{ROOT}/{name}")
    assert container.read == [ROOT]  # none of them asked again
    assert read(snapshot, f"{ROOT}/big.so") == b"x" * 64 and container.read == [ROOT, f"{ROOT}/big.so"]
    assert read(snapshot, f"{ROOT}/out.py") == b"host\n" and container.read[-1] == "/etc/hostname"


def test_a_folder_that_is_a_link_or_absent_is_left_to_the_engine(container):
    for root in (f"{ROOT}/away", "/nowhere"):
        snapshot = Snapshot(container, root)
        assert snapshot.entries is None
        assert read(snapshot, f"{root}/passwd") == read(container, f"{root}/passwd")
