"""Hostile overlay inputs: lock sources that are git options, paths out of the tree, links, bad tars."""

import io
import tarfile

import pytest

from seatkit.errors import SeatError
from seatkit.image import overlay
from seatkit.seat import overlay_lock

DIGEST = "0" * 64


def lock_text(source_line, path="overlay/vllm"):
    return (
        f"# source: {source_line}\n# commit: {'a' * 40}\n# path: {path}\n# tree: {'b' * 40}\n"
        f"{DIGEST}  __init__.py\n"
    )


@pytest.mark.parametrize(
    "hostile",
    [
        "--upload-pack=touch {canary}",
        "-uploadpack",
        "ext::sh -c touch% {canary}",
        "ssh://host/x",
        "http://host/x",
        "file:///x",
        "relative/path",
        "https://host/x --upload-pack=touch",
        "/a/../../b",
        "",
    ],
)
def test_a_lock_source_that_is_not_https_or_a_local_path_is_refused(tmp_path, hostile):
    hostile = hostile.format(canary=tmp_path / "canary")
    with pytest.raises(SeatError, match="an https URL or a local directory|header lacks"):
        overlay_lock.parse(lock_text(hostile))
    # Even a Lock made in code never reaches git with such a source.
    with pytest.raises(SeatError):
        overlay.fetch(
            overlay_lock.Lock(hostile, "a" * 40, "overlay/vllm", "b" * 40, {"x": DIGEST}), tmp_path / "dest"
        )
    assert not (tmp_path / "canary").exists()


@pytest.mark.parametrize("path", ["../x", "/etc", "-x", "a/../../b", "a b"])
def test_a_lock_path_outside_the_repository_is_refused(path):
    with pytest.raises(SeatError, match="path must be a folder inside"):
        overlay_lock.parse(lock_text("https://example.org/x", path))


def test_lock_from_refuses_an_option_as_source(tmp_path):
    with pytest.raises(SeatError, match="an https URL"):
        overlay.lock_from(tmp_path, f"--upload-pack=touch {tmp_path}/canary@{'a' * 40}")


def test_git_runs_only_the_protocols_the_kit_uses(tmp_path):
    canary = tmp_path / "canary"
    with pytest.raises(SeatError, match="transport 'ext' not allowed"):
        overlay._git("ls-remote", "--", f"ext::sh -c touch% {canary}", cwd=tmp_path)
    assert not canary.exists()


def test_fetch_from_a_local_path_still_works(tmp_path, source):
    repo, commit, tree = source
    lock = overlay.lock_from(repo / "overlay" / "vllm", f"{repo}@{commit}")
    assert overlay.fetch(lock, tmp_path / "dest").is_dir()


def test_verify_reports_links_dangling_links_linked_folders_and_caches(tmp_path, source):
    repo, commit, _ = source
    root = repo / "overlay" / "vllm"
    lock = overlay.lock_from(root, f"{repo}@{commit}")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "deepseek_v4.py").write_text("class DeepSeekV4DSpark: pass\n")
    target = root / "models" / "deepseek_v4.py"
    target.unlink()
    target.symlink_to(tmp_path / "elsewhere" / "deepseek_v4.py")  # same bytes, but a link
    (root / "gone.py").symlink_to(tmp_path / "nothing-here")
    (root / "linked").symlink_to(tmp_path / "elsewhere")
    (root / "config" / "__pycache__").mkdir()
    (root / "config" / "__pycache__" / "speculative.cpython-311.pyc").write_bytes(b"\0")
    problems = overlay.verify(root, lock)
    assert problems["changed"] == ["models/deepseek_v4.py"] and problems["missing"] == []
    assert any(line.startswith("models/deepseek_v4.py -> ") for line in problems["links"])
    assert any(line.startswith("gone.py -> ") and line.endswith("(dangling)") for line in problems["links"])
    assert any(line.startswith("linked -> ") for line in problems["links"])
    assert problems["caches"] == ["config/__pycache__"]
    assert "linked/deepseek_v4.py" not in problems["extra"]  # a linked folder is not walked


def tar_with(member: tarfile.TarInfo, data: bytes = b"x") -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        member.size = len(data) if member.isfile() else 0
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    buffer.seek(0)
    return buffer


def _member(name, kind=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    "member",
    [
        _member("/etc/evil"),
        _member("../evil"),
        _member("a/../../evil"),
        _member("link", tarfile.SYMTYPE, "/etc/passwd"),
        _member("link", tarfile.SYMTYPE, "../../etc"),
        _member("hard", tarfile.LNKTYPE, "../../etc/passwd"),
        _member("dev", tarfile.CHRTYPE),
    ],
    ids=lambda m: m.name,
)
def test_unsafe_tar_members_are_refused_with_a_clear_error(tmp_path, member):
    dest = tmp_path / "out" / "deep"
    dest.mkdir(parents=True)
    with pytest.raises(SeatError, match="refused an unsafe archive member"):
        overlay.extract(tar_with(member), dest, "test archive")
    assert not (tmp_path / "evil").exists() and not (tmp_path / "out" / "evil").exists()


def test_a_safe_tar_extracts(tmp_path):
    overlay.extract(tar_with(_member("pkg/mod.py")), tmp_path, "test archive")
    assert (tmp_path / "pkg" / "mod.py").read_bytes() == b"x"
