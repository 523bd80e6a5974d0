"""Real linters and a real compose parser on the rendered files."""

import json
import subprocess

from conftest import REPO, tool

from seatkit.seat import profiles
from seatkit.serve import render
from seatkit.serve import spec as specs


def test_shellcheck_passes_on_every_rendered_script():
    scripts = sorted(str(p) for p in (REPO / "serve").glob("*.sh"))
    assert len(scripts) == len(profiles.profile_names())
    done = subprocess.run([tool("shellcheck"), "--severity=style", *scripts], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_shellcheck_catches_a_planted_defect(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text(
        (REPO / "serve" / "cpu-smoke.sh")
        .read_text()
        .replace('dir="${SEAT_HOME}"', "dir=${SEAT_HOME}")
        .replace('[ -d "$dir" ]', "[ -d $dir ]")
    )
    assert subprocess.run([tool("shellcheck"), str(bad)], capture_output=True).returncode == 1


def test_compose_accepts_the_rendered_file(compose):
    done = subprocess.run(
        [*compose, "-f", str(REPO / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr


def test_compose_rejects_a_broken_copy(compose, tmp_path):
    text = (REPO / "docker-compose.yml").read_text().replace("count: all", "count: many")
    (tmp_path / "docker-compose.yml").write_text(text)
    (tmp_path / ".env").write_text((REPO / ".env").read_text())
    done = subprocess.run([*compose, "config", "-q"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode != 0 and "count" in done.stderr


HOSTILE = [
    '/srv/my models/it\'s "quoted"',
    "/srv/$(touch pwned)/`id`",
    "/srv/a\\b$HOME\nx",
    "/srv/${SEAT_PORT}/#hash",
]


def test_compose_reads_hostile_values_back_unchanged(compose, tmp_path):
    base = profiles._raw(profiles.profile_path(profiles.DEFAULT_PROFILE))[0]
    for i, value in enumerate(HOSTILE):
        target = value.replace("/srv/", "/models-")  # where it lands in the container
        data = {
            **base,
            "name": "hostile",
            "vllm_args": {**base["vllm_args"], "chat-template": value},
            "env": {**base["env"], "HOSTILE": value},
            # a path in env is refused in a verified profile; this test is about compose's quoting
            "experiment": {"unverified": True, "reason": "test: hostile values through compose"},
        }
        data["models"] = {
            **base["models"],
            "base": {**base["models"]["base"], "host_dir": value, "mount": target},
        }
        spec = specs.build(profiles.parse(data))
        case = tmp_path / str(i)
        case.mkdir()
        (case / "docker-compose.yml").write_text(render.render_compose(spec))
        (case / ".env").write_text(render.render_env(spec))
        done = subprocess.run(
            [*compose, "config", "--format", "json"], capture_output=True, text=True, cwd=case
        )
        assert done.returncode == 0, (value, done.stderr)
        # compose prints a compose file again, so a literal $ comes back escaped as $$.
        service = json.loads(done.stdout.replace("$$", "$"))["services"]["seat"]
        assert service["environment"]["HOSTILE"] == value
        assert service["volumes"][0]["source"] == value
        assert service["volumes"][0]["target"] == target  # escaped like the command
        command = service["command"]
        assert command[command.index("--chat-template") + 1] == value
        assert command[command.index("vllm") + 2] == target
        assert not (case / "pwned").exists()


def test_hadolint_and_shellcheck_pass_on_the_image_files():
    done = subprocess.run([tool("hadolint"), str(REPO / "Dockerfile")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    scripts = sorted(str(p) for p in (REPO / "image").glob("*.sh"))
    assert len(scripts) == 5
    done = subprocess.run([tool("shellcheck"), "--severity=style", *scripts], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_hadolint_catches_a_shell_form_healthcheck(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text(
        (REPO / "Dockerfile")
        .read_text()
        .replace('CMD ["/opt/seatkit/health.sh"]', "CMD curl -f http://127.0.0.1:8000/health || exit 1")
    )
    done = subprocess.run([tool("hadolint"), str(bad)], capture_output=True, text=True)
    assert done.returncode == 1 and "DL" in done.stdout
