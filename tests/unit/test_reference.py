"""docs/commands.md's command table and the Dockerfile's defaults: written by `seat render`, checked by
`seat render --check`."""

import shutil

import click
import pytest

from seatkit import paths, regions
from seatkit.cli import reference
from seatkit.cli.app import seat
from seatkit.errors import SeatError
from seatkit.image import dockerfile
from seatkit.seat import overlay_lock, profiles
from seatkit.serve import render


def copy_of_the_rendered_files(tmp_path):
    for path in [
        *render.rendered(paths.REPO),
        paths.REPO / "docs" / "commands.md",
        paths.REPO / "Dockerfile",
        overlay_lock.LOCK,
    ]:
        target = tmp_path / path.relative_to(paths.REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    return tmp_path


def test_every_command_is_in_the_command_page_with_its_own_help():
    text = (paths.REPO / "docs" / "commands.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `seat ")]
    commands = list(reference._commands(seat, click.Context(seat, info_name="seat")))
    assert len(rows) == len(commands) >= 25
    for command, ctx in commands:
        row = next(
            r
            for r in rows
            if r.startswith(f"| `{ctx.command_path} ") or r.startswith(f"| `{ctx.command_path}`")
        )
        assert " ".join(reference._summary(command).split()).replace("|", "\\|") in row
    assert "| `seat overlay fetch` |" in text and "`--from`" in text


def test_a_stale_table_fails_the_check_and_render_rewrites_it(tmp_path):
    root = copy_of_the_rendered_files(tmp_path)
    readme = root / "docs" / "commands.md"
    fresh = readme.read_text()
    readme.write_text(
        "\n".join(line for line in fresh.splitlines() if "| `seat overlay fetch`" not in line) + "\n"
    )
    extra = reference.regions_of(root)
    with pytest.raises(SeatError, match="commands.md") as caught:
        render.require_no_drift(root, extra)
    assert "+| `seat overlay fetch` |" in caught.value.message
    assert readme in render.write(root, extra) and readme.read_text() == fresh
    render.require_no_drift(root, reference.regions_of(root))


def test_a_new_command_s_help_reaches_the_table():
    group = click.Group(
        "seat",
        commands=[
            click.Command(
                "probe",
                help="Probe the seat | twice.\n\nMore.",
                params=[click.Argument(["thing"]), click.Option(["--fast", "-f"], is_flag=True)],
            )
        ],
    )
    assert (
        reference.table(group).splitlines()[2]
        == "| `seat probe THING` | Probe the seat \\| twice. Options: `--fast`. |"
    )


def test_a_changed_lock_makes_the_dockerfile_stale(tmp_path):
    root = copy_of_the_rendered_files(tmp_path)
    lock = overlay_lock.load()
    lock.files["added.py"] = "0" * 64
    (root / "overlay" / "overlay.lock").write_text(lock.dump())
    found = render.drift(root, reference.regions_of(root))
    assert set(found) & {root / "docs" / "commands.md", root / "Dockerfile"} == {root / "Dockerfile"}
    assert f'+ARG OVERLAY_LOCK_SHA256="{lock.sha256}"' in found[root / "Dockerfile"]


def test_the_dockerfile_defaults_are_the_default_seat_s_build_arguments():
    text = (paths.REPO / "Dockerfile").read_text()
    args = dockerfile.build_args(profiles.load(profiles.DEFAULT_PROFILE), overlay_lock.load())
    for name, value in args.items():
        assert f'ARG {name}="{value}"' in text
    with pytest.raises(SeatError, match="quote, backslash"):
        dockerfile.defaults(
            profiles.load(profiles.DEFAULT_PROFILE),
            overlay_lock.Lock('https://x/"$(id)"', "a" * 40, "p", "b" * 40, {"x": "0" * 64}),
        )


def test_a_file_without_its_markers_is_a_clear_error():
    with pytest.raises(SeatError, match="exactly one region marked"):
        regions.replace("no markers here\n", "body\n", "README.md")
    assert (
        regions.replace("a\n<!-- begin: rendered -->\nold\n<!-- end: rendered -->\nz\n", "new", "f")
        == "a\n<!-- begin: rendered -->\nnew\n<!-- end: rendered -->\nz\n"
    )


@pytest.mark.parametrize(
    "text",
    [
        # prose quoting the markers before the region: its lines up to the real end were overwritten
        "intro\nThe table sits between begin: rendered and end: rendered lines.\nkeep me\n"
        "<!-- begin: rendered -->\nold\n<!-- end: rendered -->\n",
        # a second region: left stale, and `seat render --check` passed
        "<!-- begin: rendered -->\nold\n<!-- end: rendered -->\n<!-- begin: rendered -->\nstale\n<!-- end: rendered -->\n",
        # the markers swapped
        "<!-- end: rendered -->\nold\n<!-- begin: rendered -->\n",
    ],
)
def test_ambiguous_markers_are_refused_rather_than_overwriting_text(text):
    with pytest.raises(SeatError, match=r"exactly one region marked .*found \d begin and \d end lines"):
        regions.replace(text, "new\n", "README.md")
