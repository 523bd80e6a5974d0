"""Every data file the kit reads, with a clear error where an accident leaves it wrong: a models
lock, a reference card and a bench summary get the profile's treatment (bounded in size; no
duplicate keys in YAML)."""

import re
import time
import tracemalloc

import pytest
from conftest import run_dir
from model_files import BASE, DRAFT, fill, write_profile

from seatkit import safe_yaml
from seatkit.bench import cards, compare, sides
from seatkit.errors import SeatError
from seatkit.models import lock as locks
from seatkit.seat import profiles


def refused_quickly_and_small(call) -> str:
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(SeatError) as caught:
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 5 and peak < 50 * 2**20  # nothing was expanded
    return str(caught.value)


def test_a_duplicate_key_in_a_card_is_refused(tmp_path):
    card = tmp_path / "card.yaml"
    card.write_text("source: a\nsource: b\n")
    assert "duplicate key 'source'" in str(pytest.raises(SeatError, cards.load, card).value)


def test_a_huge_regular_file_is_refused_by_size(tmp_path):
    path = tmp_path / "card.yaml"
    with path.open("wb") as fh:
        fh.truncate(safe_yaml.MAX_BYTES + 1)  # sparse: costs no disk
    assert "too large for a reference card" in refused_quickly_and_small(lambda: cards.load(path))
    summary = tmp_path / "big.json"
    with summary.open("wb") as fh:
        fh.truncate(sides.SUMMARY_BYTES + 1)
    assert "too large" in refused_quickly_and_small(
        lambda: safe_yaml.read_json(summary, "bench summary", sides.SUMMARY_BYTES)
    )


def test_every_yaml_and_json_read_of_the_kit_goes_through_the_safe_loader():
    """A new yaml.safe_load or json.loads of a file would bypass every check above."""
    root = profiles.paths.REPO / "seatkit"
    bad = re.compile(r"yaml\.(safe_)?load\(|json\.loads?\([^\n]*read_text\(")
    offenders = [
        f"{source.relative_to(root)}: {line.strip()}"
        for source in root.rglob("*.py")
        if source.name != "safe_yaml.py"
        for line in source.read_text().splitlines()
        if bad.search(line)
    ]
    assert offenders == []


def test_a_directory_named_summary_json_is_a_clear_error(tmp_path):
    good = run_dir(tmp_path, "good", "tiny", 600, 5.5, 9.2)
    (tmp_path / "dir" / "summary.json").mkdir(parents=True)
    with pytest.raises(SeatError, match="summary.json is not a file"):
        compare.compare(good, str(tmp_path / "dir"))


def test_a_link_loop_or_an_unreadable_file_is_a_clear_error(tmp_path):
    loop = tmp_path / "card.yaml"
    loop.symlink_to("card.yaml")
    with pytest.raises(SeatError, match="cannot read this reference card"):
        cards.load(loop)
    with pytest.raises(SeatError, match="cannot read this bench summary"):
        safe_yaml.read_json(loop, "bench summary")


@pytest.mark.parametrize("text", ["when: 2001-13-45\n", "n: " + "9" * 5000 + "\n"])
def test_a_yaml_scalar_that_cannot_be_built_is_a_clear_error(tmp_path, text):
    path = tmp_path / "card.yaml"
    path.write_text(text)
    with pytest.raises(SeatError, match="not valid YAML for a reference card"):
        cards.load(path)


def test_a_models_lock_with_an_infinite_size_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    fill(tmp_path / "base", BASE)
    fill(tmp_path / "draft", DRAFT)
    profile = profiles.load(write_profile(tmp_path))
    locks.lock_path(profile).write_text(
        "models:\n  base:\n    repository: null\n    revision: null\n    sha256: x\n"
        "    files: [{path: a, size: .inf, sha256: x}]\n"
    )
    with pytest.raises(
        SeatError, match="not a models lock: a field is missing or holds the wrong kind of value"
    ):
        locks.read(profile)
