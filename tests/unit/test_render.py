"""Rendering: committed files equal a fresh render, and hostile values keep their meaning."""

import shutil

from click.testing import CliRunner
from conftest import run_script
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seatkit import paths
from seatkit.cli.app import seat
from seatkit.seat import profiles
from seatkit.serve import render
from seatkit.serve import spec as specs

# Spaces, quotes, $(...), backticks, globs, backslashes and newlines.
HOSTILE = st.text(alphabet=st.sampled_from(list("ab -_/'\"$()`;&|*?\\\n{}#~")), min_size=1, max_size=24)
PATH = HOSTILE.map(lambda s: "/srv/" + s.replace(":", "").replace(",", ""))


def test_committed_files_equal_a_fresh_render():
    assert render.drift() == {}


def test_render_check_cli_passes_on_the_checkout():
    result = CliRunner().invoke(seat, ["render", "--check"])
    assert result.exit_code == 0, result.output


# The profiles and what is rendered from them, as committed.
COMMITTED = ["profiles", "serve", "k8s", "compose", "docker-compose.yml", ".env", "LAUNCH_CONFIG.md"]


def test_no_committed_profile_or_rendered_file_names_a_home_folder():
    """A home folder is one machine's user: a built model's folder comes from SEAT_HOME instead."""
    files = [
        path
        for name in COMMITTED
        for path in ([paths.REPO / name] if (paths.REPO / name).is_file() else (paths.REPO / name).rglob("*"))
        if path.is_file()
    ]
    assert set(render.rendered(paths.REPO)) <= set(files) | {
        paths.REPO / "docs" / "commands.md",
        paths.REPO / "Dockerfile",
    }
    found = [
        f"{path.relative_to(paths.REPO)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "/root/" in line or "/home/" in line
    ]
    assert found == []


def test_drift_names_the_changed_file(tmp_path):
    for path in render.rendered(paths.REPO):
        target = tmp_path / path.relative_to(paths.REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(compose.read_text().replace("ipc: host", "ipc: private"))
    (tmp_path / "serve" / "removed-profile.sh").write_text("#!/bin/bash\n")
    found = render.drift(tmp_path)
    assert set(found) == {compose, tmp_path / "serve" / "removed-profile.sh"}
    assert "-    ipc: private" in found[compose] and "+    ipc: host" in found[compose]


def test_every_flag_and_variable_is_explained():
    text = (paths.REPO / "LAUNCH_CONFIG.md").read_text()
    seat = profiles.load(profiles.DEFAULT_PROFILE)
    for flag in seat.vllm_args:
        assert f"`--{flag}`" in text
    for name in seat.env:
        assert f"`{name}`" in text
    for decision in seat.decisions:
        assert decision.topic in text


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=PATH)
def test_hostile_knob_from_the_environment_is_data_not_code(tmp_path, path):
    seat = profiles.load(profiles.DEFAULT_PROFILE)
    hostile = path + "$(touch pwned)`touch pwned`"
    argv = run_script(render.render_script(specs.build(seat)), tmp_path, {"SEAT_MODEL_DRAFT_DIR": hostile})
    assert f"{hostile}:/models-draft:ro".encode() in argv
    assert not (tmp_path / "pwned").exists()


def test_the_missing_image_hint_names_seat_build_only_for_a_profile_it_builds():
    """The prebuilt profile's script told the operator to `seat build` it: that built the overlay
    over the author's image into a tag the script never runs."""
    prebuilt = render.render_script(specs.build(profiles.load("deepspark-prebuilt")))
    default = render.render_script(specs.build(profiles.load(profiles.DEFAULT_PROFILE)))
    assert '"docker pull it"' in prebuilt and "seat build deepspark-prebuilt" not in prebuilt
    assert f"nothing to pull: seat build {profiles.DEFAULT_PROFILE} makes it" in default
