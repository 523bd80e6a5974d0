"""overlay.lock parsing, verify on a fixture tree, fetch from a local git repository, atomicity;
and odd inputs: links, bad tars, git protocols the kit does not use."""

import io
import subprocess
import tarfile
import zlib
from pathlib import Path

import pytest
from conftest import git

from seatkit.errors import SeatError
from seatkit.image import overlay
from seatkit.seat import overlay_lock


def test_shipped_lock_pins_the_original_overlay():
    lock = overlay_lock.load()
    assert lock.commit == "731bbcb90b64b6a2f60a882ea118a557b9815263"
    assert lock.tree == "2706883663e835474b156955942028fe6678de97" and lock.path == "overlay/vllm"
    assert len(lock.files) == 2205 and not any(n.startswith("models/") for n in lock.files)
    assert overlay_lock.parse(lock.dump()).files == lock.files


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "# source: s\n# commit: " + "a" * 40 + "\n# path: p\n# tree: " + "b" * 40 + "\nnothex  x.py\n",
            "expected '<64 hex sha256>  <path>'",
        ),
        ("# source: s\n# commit: " + "a" * 40 + "\n# path: p\n" + "c" * 64 + "  x.py\n", "header lacks tree"),
    ],
)
def test_bad_locks_are_refused_with_the_line(text, message):
    with pytest.raises(SeatError, match=message):
        overlay_lock.parse(text)


def test_verify_reports_missing_changed_and_extra(tmp_path, source):
    repo, commit, _ = source
    lock = overlay.lock_from(repo / "overlay/vllm", f"{repo}@{commit}")
    tree = tmp_path / "tree"
    subprocess.run(["cp", "-r", str(repo / "overlay/vllm"), str(tree)], check=True)
    assert overlay.verify(tree, lock) == {
        "missing": [],
        "changed": [],
        "extra": [],
        "links": [],
        "caches": [],
    }
    (tree / "models/deepseek_v4.py").unlink()
    (tree / "__init__.py").write_text("VERSION = 2\n")
    (tree / "planted.py").write_text("")
    (tree / "__pycache__").mkdir()
    (tree / "__pycache__/x.pyc").write_bytes(b"\0")
    assert overlay.verify(tree, lock) == {
        "missing": ["models/deepseek_v4.py"],
        "changed": ["__init__.py"],
        "extra": ["planted.py"],
        "links": [],
        "caches": ["__pycache__"],
    }


def test_lock_from_gives_git_s_own_tree_id(source):
    repo, commit, tree = source
    (repo / "overlay/vllm/.gitignore").write_text("models/\n")  # the original's defect: must not hide files
    git("add", "-f", "overlay/vllm/.gitignore", cwd=repo)
    git("commit", "-q", "-m", "ignore", cwd=repo)
    commit, tree = git("rev-parse", "HEAD", cwd=repo), git("rev-parse", "HEAD:overlay/vllm", cwd=repo)
    lock = overlay.lock_from(repo / "overlay/vllm", f"{repo}@{commit}")
    assert lock.tree == tree and "models/deepseek_v4.py" in lock.files
    with pytest.raises(SeatError, match="URL@COMMIT"):
        overlay.lock_from(repo, "no-commit")


@pytest.mark.parametrize("plant", ["link", "cache"])
def test_a_tree_a_fetch_could_never_match_is_not_locked(tmp_path, source, plant):
    """git's tree id counts a symlink or a __pycache__, the file list does not: such a lock would
    make every later fetch fail, so it is refused when made."""
    repo, commit, _ = source
    tree = tmp_path / "tree"
    subprocess.run(["cp", "-r", str(repo / "overlay/vllm"), str(tree)], check=True)
    if plant == "link":
        (tree / "alias.py").symlink_to("__init__.py")
    else:
        (tree / "__pycache__").mkdir()
        (tree / "__pycache__" / "x.pyc").write_bytes(b"\0")
    with pytest.raises(SeatError, match="what a lock cannot pin") as caught:
        overlay.lock_from(tree, f"{repo}@{commit}")
    assert ("alias.py -> __init__.py" if plant == "link" else "__pycache__") in caught.value.message


def test_fetch_places_exactly_the_locked_files(tmp_path, source):
    repo, commit, _ = source
    lock = overlay.lock_from(repo / "overlay/vllm", f"{repo}@{commit}")
    dest = tmp_path / "out" / "vllm"
    overlay.fetch(lock, dest)
    assert overlay.verify(dest, lock) == {
        "missing": [],
        "changed": [],
        "extra": [],
        "links": [],
        "caches": [],
    }
    assert sorted(p.name for p in dest.parent.iterdir()) == ["vllm"]  # no staging left behind


def previous_state(dest):
    return {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda lock: setattr(lock, "tree", "0" * 40), "has tree"),
        (lambda lock: setattr(lock, "commit", "1" * 40), "git fetch"),
    ],
)
def test_a_failed_fetch_leaves_the_previous_state_untouched(tmp_path, source, tamper, message):
    repo, commit, _ = source
    dest = tmp_path / "out" / "vllm"
    dest.mkdir(parents=True)
    (dest / "old.py").write_text("the previous overlay\n")
    before = previous_state(dest)
    lock = overlay.lock_from(repo / "overlay/vllm", f"{repo}@{commit}")
    tamper(lock)
    with pytest.raises(SeatError, match=message):
        overlay.fetch(lock, dest)
    assert previous_state(dest) == before
    assert sorted(p.name for p in dest.parent.iterdir()) == ["vllm"]


def test_fetch_from_a_local_clone_takes_the_same_commit_and_keeps_the_lock_s_source(tmp_path, source):
    repo, commit, _ = source
    lock = overlay.lock_from(repo / "overlay/vllm", "https://example.invalid/unreachable@" + commit)
    clone = tmp_path / "clone"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)
    dest = tmp_path / "out" / "vllm"
    overlay.fetch(lock, dest, source=str(clone))
    assert not any(overlay.verify(dest, lock).values())
    with pytest.raises(SeatError, match="git fetch"):  # without --from: the lock's own source
        overlay.fetch(lock, tmp_path / "other" / "vllm")


def test_a_mirror_with_a_tampered_file_is_refused_and_nothing_is_placed(tmp_path, source):
    """A mirror cannot pass off other content as the locked commit: edited history has other ids,
    and a blob swapped under its old id in the object store fails git's own hash check."""
    repo, commit, _ = source
    lock = overlay.lock_from(repo / "overlay/vllm", f"{repo}@{commit}")
    edited = tmp_path / "edited"
    git("clone", "-q", str(repo), str(edited), cwd=tmp_path)
    (edited / "overlay/vllm/__init__.py").write_text("VERSION = 'tampered'\n")
    git("commit", "-q", "-a", "--amend", "--no-edit", cwd=edited)
    git("remote", "remove", "origin", cwd=edited)  # nothing keeps the original commit
    git("reflog", "expire", "--expire=now", "--all", cwd=edited)
    git("gc", "-q", "--prune=now", cwd=edited)
    swapped = tmp_path / "swapped"
    git("init", "-q", str(swapped), cwd=tmp_path)
    git("fetch", "-q", str(repo), "HEAD:refs/heads/main", cwd=swapped)  # few objects: stored loose
    blob = git("rev-parse", f"{commit}:overlay/vllm/__init__.py", cwd=swapped)
    loose = swapped / ".git" / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(b"blob 21\0VERSION = 'tampered'\n"))
    dest = tmp_path / "out" / "vllm"
    for mirror, message in ((edited, "git fetch"), (swapped, "missing blob")):
        with pytest.raises(SeatError, match=message):
            overlay.fetch(lock, dest, source=str(mirror))
        assert not dest.exists() and sorted(p.name for p in dest.parent.iterdir()) == []


def test_the_cli_fetches_from_the_given_clone_and_refuses_an_option(tmp_path, source):
    from click.testing import CliRunner

    from seatkit.cli.app import seat

    repo, commit, _ = source
    lock_file = tmp_path / "overlay.lock"
    lock_file.write_text(
        overlay.lock_from(repo / "overlay/vllm", "https://example.invalid/o@" + commit).dump()
    )
    dest = tmp_path / "vllm"
    done = CliRunner().invoke(
        seat, ["overlay", "fetch", "--lock", str(lock_file), "--dest", str(dest), "--from", str(repo)]
    )
    assert done.exit_code == 0, done.output
    assert "3 files verified" in done.output and (dest / "config" / "speculative.py").is_file()
    refused = CliRunner().invoke(
        seat,
        [
            "overlay",
            "fetch",
            "--lock",
            str(lock_file),
            "--dest",
            str(tmp_path / "other"),
            "--from=--upload-pack=touch pwned",
        ],
    )
    assert isinstance(refused.exception, SeatError) and "git fetch" in refused.exception.message


def test_a_source_with_credentials_in_its_url_is_refused_without_echoing_them(tmp_path):
    """A token in --from was accepted, then shown in the progress line and in a tree-mismatch error."""
    lock = overlay_lock.Lock(
        "https://example.invalid/o", "a" * 40, "overlay/vllm", "b" * 40, {"x.py": "0" * 64}
    )
    for value in ("https://user:s3cret@mirror.invalid/o", "https://s3cret@mirror.invalid/o"):
        with pytest.raises(SeatError, match="credentials in its URL") as caught:
            overlay.fetch(lock, tmp_path / "vllm", source=value)
        assert "s3cret" not in caught.value.message + (caught.value.hint or "")
    assert overlay.checked_source("https://mirror.invalid/team/o@v1") == "https://mirror.invalid/team/o@v1"


def test_lock_from_a_relative_path_pins_the_same_tree(tmp_path, source, monkeypatch):
    """git ran in the folder with the relative path as its work tree, naming a folder inside it."""
    repo, commit, _ = source
    absolute = overlay.lock_from(repo / "overlay/vllm", f"{repo}@{commit}")
    monkeypatch.chdir(repo)
    relative = overlay.lock_from(Path("overlay/vllm"), f"{repo}@{commit}")
    assert relative.tree == absolute.tree and relative.files == absolute.files


@pytest.mark.parametrize("name", [".git", ".GIT", ".Git"])
def test_a_folder_holding_git_metadata_is_not_locked(tmp_path, source, name):
    """git skips .git (in any case) when it computes the tree id, the file list would not: no
    fetch could match."""
    repo, commit, _ = source
    tree = tmp_path / "tree"
    subprocess.run(["cp", "-r", str(repo / "overlay/vllm"), str(tree)], check=True)
    (tree / "models" / name).mkdir()
    (tree / "models" / name / "HEAD").write_text("ref: refs/heads/main\n")
    with pytest.raises(SeatError, match=rf"1 git folders \(e.g. models/{name}\)"):
        overlay.lock_from(tree, f"{repo}@{commit}")


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
