"""seatkit/serve/launch.py and `seat up | down | status | logs`: the API key path, exposure without a key, the
seat's identity on its port, `seat status` for people, plain progress lines, docker refusals and an engine
that hangs or garbles."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, free_port, seat_cli, stand_in_server
from rich.console import Console

from seatkit import engine, flock, paths, when
from seatkit.cli import app
from seatkit.cli import progress as cli_progress
from seatkit.errors import SeatError
from seatkit.seat import layout, profiles
from seatkit.serve import backends, identity, keys, launch, render
from seatkit.serve import spec as specs
from seatkit.serve.backends import docker as docker_backend
from seatkit.serve.backends import native
from seatkit.serve.backends.docker import create_and_start
from seatkit.serve.backends.native import process_start

KEYED = "cpu-smoke-keyed"


def script(profile, env):
    return subprocess.run(
        ["bash", str(REPO / "serve" / f"{profile}.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SEAT_DRY_RUN": "1", **env},
    )


def test_one_key_path_follows_seat_home_in_python_and_the_script(home):
    spec = specs.build(profiles.load(KEYED))
    path = home / "keys" / KEYED
    assert spec.values()["SEAT_API_KEY_FILE"] == str(path) == str(layout.keys(KEYED))
    keys.ensure(path)
    done = script(KEYED, {})
    assert done.returncode == 0, done.stderr
    assert path.read_text().strip() not in done.stdout + done.stderr  # dry run shows no key
    path.unlink()
    warned = script(KEYED, {})  # a dry run shows preflight findings as warnings
    assert warned.returncode == 0 and f"warning: API key file missing: {path}" in warned.stderr
    missing = script(KEYED, {"SEAT_DRY_RUN": "0"})
    assert missing.returncode == 1 and f"API key file missing: {path}" in missing.stderr


@pytest.mark.parametrize("content", ["", "   \n", "\n\t\n", "two words\n"])
def test_an_empty_or_spaced_key_is_refused_by_python_and_the_script(home, content):
    path = home / "keys" / KEYED
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(SeatError, match="holds no usable key"):
        keys.ensure(path)
    done = script(KEYED, {"SEAT_DRY_RUN": "0"})
    assert done.returncode == 1 and "holds no usable key" in done.stderr


@pytest.mark.parametrize("content", ["k3y\r\n", " k3y\n", "\tk3y"])
def test_python_and_the_script_agree_on_a_crlf_or_indented_key(home, content):
    """seat up stripped all whitespace and served 'k3y' while the script refused the same file."""
    path = home / "keys" / KEYED
    path.parent.mkdir()
    path.write_text(content, newline="")
    path.chmod(0o600)
    with pytest.raises(SeatError, match="holds no usable key"):
        keys.ensure(path)
    done = script(KEYED, {"SEAT_DRY_RUN": "0"})
    assert done.returncode == 1 and "holds no usable key" in done.stderr


def test_a_key_file_that_is_no_text_file_is_refused_not_a_traceback(home):
    folder, binary = home / "folder", home / "binary"
    folder.mkdir()
    binary.write_bytes(b"\xff\xfe\x00key")
    binary.chmod(0o600)
    for path, why in ((folder, "cannot read the API key file"), (binary, "not text")):
        with pytest.raises(SeatError, match=why):
            keys.read(path)
        with pytest.raises(SeatError, match=why):
            keys.ensure(path)


def test_a_key_file_others_can_read_is_refused_and_never_chmod_ed(home):
    """SEAT_API_KEY_FILE may be a link to any file: seat up must not change its mode."""
    target = home / "shared-secret"
    target.write_text("k3y\n")
    target.chmod(0o644)
    link = home / "key-link"
    link.symlink_to(target)
    with pytest.raises(SeatError, match="open to other users") as refused:
        keys.ensure(link)
    assert "k3y" not in str(refused.value) + (refused.value.hint or "")
    assert (target.stat().st_mode & 0o777) == 0o644
    target.chmod(0o600)
    assert keys.ensure(link) == link and keys.read(link) == "k3y"


def test_up_makes_the_key_before_preflight_and_hands_it_to_the_server_only(home, monkeypatch):
    started = {}

    def fake_start(spec, values, log, env):
        started.update(env)
        raise SeatError("stand-in start")

    monkeypatch.setattr(native, "spawn", fake_start)
    with pytest.raises(SeatError, match="stand-in start"):
        launch.up(specs.build(profiles.load(KEYED)))
    key = (home / "keys" / KEYED).read_text().strip()
    assert started == {"VLLM_API_KEY": key} and oct((home / "keys" / KEYED).stat().st_mode)[-3:] == "600"
    # Not in the rendered files (the docker set from a keyed default seat), nor in SEAT_HOME.
    seat = profiles.load(profiles.DEFAULT_PROFILE)
    seat = seat.model_copy(update={"server": seat.server.model_copy(update={"api_key": True})})
    (home / "keys" / seat.name).write_text(key + "\n")
    docker = specs.build(seat)
    rendered = (
        render.render_script(specs.build(profiles.load(KEYED)))
        + render.render_env(docker)
        + render.render_launch_config(docker)
        + render.render_compose(docker)
    )
    assert "VLLM_API_KEY" in rendered and key not in rendered
    assert all(key not in p.read_text() for p in home.rglob("*") if p.is_file() and "keys" not in p.parts)


@pytest.mark.parametrize("host", ["0.0.0.0", "seat.example", "::", "127.evil.example"])
def test_no_key_no_exposure_unless_said_so(home, monkeypatch, host):
    monkeypatch.setenv("SEAT_HOST", host)
    with pytest.raises(SeatError, match=f"refusing to serve on {host} without an API key"):
        launch.up(specs.build(profiles.load("cpu-smoke")))
    # Not a preflight check, so not skippable; a dry run shows it as a warning.
    done = script("cpu-smoke", {"SEAT_SKIP_PREFLIGHT": "1", "SEAT_DRY_RUN": "0"})
    assert done.returncode == 1 and f"refusing to serve on {host} without an API key" in done.stderr
    warned = script("cpu-smoke", {"SEAT_SKIP_PREFLIGHT": "1"})
    assert warned.returncode == 0 and f"warning: refusing to serve on {host}" in warned.stderr
    allowed = script("cpu-smoke", {"SEAT_SKIP_PREFLIGHT": "1", keys.EXPOSE_WITHOUT_KEY: "1"})
    assert allowed.returncode == 0 and host in allowed.stdout
    keys.refuse_exposure(host, False, {keys.EXPOSE_WITHOUT_KEY: "1"})
    keys.refuse_exposure(host, True, {})


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "localhost"])
def test_loopback_needs_no_key(host):
    keys.refuse_exposure(host, False, {})


LISTEN = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("listening", flush=True)
time.sleep(300)
"""


def reuseport_listener(port):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


@pytest.fixture
def stand_in_seat():
    """A process in its own session listening like vLLM (SO_REUSEPORT): the 'seat'."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", LISTEN, str(port)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout.readline().strip() == "listening"
    yield proc, port
    proc.kill()
    proc.wait()


def test_a_foreign_reuseport_listener_is_named(stand_in_seat):
    proc, port = stand_in_seat
    pids = lambda: identity.session_pids(proc.pid)  # noqa: E731
    assert identity.check(port, pids) == identity.OURS
    with reuseport_listener(port):
        with pytest.raises(SeatError, match=f"also listens on port {port}.*SO_REUSEPORT"):
            identity.check(port, pids)
    assert identity.check(port, pids) == identity.OURS
    assert identity.check(free_port(), pids) == identity.NOT_YET


def test_unreadable_socket_tables_are_unverifiable_not_nobody_listening(stand_in_seat, tmp_path, monkeypatch):
    """Without /proc/net the seat that listens was taken for 'not listening yet': wait_ready
    timed out on a ready server and require_identity said nothing listened any more."""
    proc, port = stand_in_seat
    monkeypatch.setattr(identity, "TABLES", (str(tmp_path / "no-tcp"), str(tmp_path / "no-tcp6")))
    proof = identity.check(port, lambda: identity.session_pids(proc.pid))
    assert proof.startswith("unverifiable: cannot read the kernel's socket tables")
    run = launch.Running(
        "x",
        "native",
        str(proc.pid),
        f"http://127.0.0.1:{port}",
        "tiny",
        str(tmp_path / "log"),
        0,
        since=process_start(proc.pid),
    )
    assert launch.require_identity(run) == proof


ODD_MODELS = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Odd(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        body = b"{}" if self.path == "/health" else json.dumps({"data": ["tiny", 7]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
server = HTTPServer(("127.0.0.1", int(sys.argv[1])), Odd)
print("listening", flush=True)
server.serve_forever()
"""


def test_wait_ready_keeps_waiting_through_odd_models_json(tmp_path):
    """/v1/models whose data are not objects ended wait_ready in a TypeError traceback."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", ODD_MODELS, str(port)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout.readline().strip() == "listening"
        run = launch.Running(
            "x",
            "native",
            str(proc.pid),
            f"http://127.0.0.1:{port}",
            "tiny",
            str(tmp_path / "log"),
            0,
            since=process_start(proc.pid),
        )
        with pytest.raises(SeatError, match="not ready after 5 s .waiting for models"):
            launch.wait_ready(run, 5, lambda stage, t: None)
    finally:
        proc.kill()
        proc.wait()


def test_wait_ready_refuses_a_stranger_on_the_port_at_once(stand_in_seat, tmp_path):
    proc, port = stand_in_seat
    run = launch.Running(
        "x",
        "native",
        str(proc.pid),
        f"http://127.0.0.1:{port}",
        "tiny",
        str(tmp_path / "log"),
        0,
        since=process_start(proc.pid),
    )
    with reuseport_listener(port):
        with pytest.raises(SeatError, match="another process, not the seat"):
            launch.wait_ready(run, 60, lambda stage, t: None)
    with pytest.raises(SeatError, match="another process, not the seat"):
        with reuseport_listener(port):
            launch.require_identity(run)
    assert launch.require_identity(run) == identity.OURS


class KeyedModels(BaseHTTPRequestHandler):
    key = ""

    def log_message(self, *args):
        pass

    def do_GET(self):
        ok = self.path == "/health" or self.headers.get("Authorization") == f"Bearer {self.key}"
        body = json.dumps({"data": [{"id": "tiny"}]}).encode() if ok else b'{"error": "Unauthorized"}'
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_status_uses_the_key_and_prints_times_a_person_reads(home):
    key_path = keys.ensure(home / "keys" / KEYED)
    KeyedModels.key = keys.read(key_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), KeyedModels)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    started = time.time() - 2 * 3600
    run = launch.Running(
        KEYED,
        "native",
        str(os.getpid()),
        f"http://127.0.0.1:{server.server_address[1]}",
        "tiny",
        str(home / "log"),
        started,
        api_key_file=str(key_path),
        since=process_start(os.getpid()),
    )
    launch._record(run)
    from seatkit.cli.app import seat

    try:
        human = CliRunner().invoke(seat, ["status", KEYED])
        raw = CliRunner().invoke(seat, ["status", KEYED, "--json"])
    finally:
        server.shutdown()
        server.server_close()
    assert human.exit_code == 0, human.output
    assert "2 h ago" in human.output and "Z (" in human.output and repr(started) not in human.output
    assert "process started 20" in human.output and f"since: {run.since}" not in human.output
    assert "models: tiny\n" in human.output  # /v1/models answered through the key, not 401
    info = json.loads(raw.output)
    assert info["started"] == started and info["since"] == run.since and info["models"] == ["tiny"]
    assert KeyedModels.key not in human.output + raw.output


class OddModels(BaseHTTPRequestHandler):
    data: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"data": self.data}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize(
    "data, shown", [(["tiny"], "not an OpenAI model list"), ([{"id": "[/b]tiny"}], "[/b]tiny")]
)
def test_status_survives_a_server_with_odd_model_ids(home, data, shown):
    """'data' of strings ended seat status in an AttributeError traceback, an id with rich
    markup in a MarkupError one."""
    OddModels.data = data
    server = ThreadingHTTPServer(("127.0.0.1", 0), OddModels)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    launch._record(
        launch.Running(
            "odd",
            "native",
            str(os.getpid()),
            f"http://127.0.0.1:{server.server_address[1]}",
            "tiny",
            str(home / "log"),
            time.time(),
        )
    )
    from seatkit.cli.app import seat

    try:
        human = CliRunner().invoke(seat, ["status", "odd"])
    finally:
        server.shutdown()
        server.server_close()
    assert human.exit_code == 0 and human.exception is None, human.output
    assert f"models: {shown}" in human.output


def test_an_ipv6_seat_host_makes_a_url_that_reaches_it():
    """SEAT_HOST=::1 made http://::1:PORT, which requests refuses: seat up waited out its timeout."""

    class V6(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    server = V6(("::1", 0), OddModels)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        url = launch.seat_url("::1", str(port))
        assert url == f"http://[::1]:{port}" and int(url.rsplit(":", 1)[1]) == port
        assert launch.client.fetch("GET", f"{url}/v1/models", 30).ok
        assert launch.seat_url("127.0.0.1", "80") == "http://127.0.0.1:80"
    finally:
        server.shutdown()
        server.server_close()


def test_human_times():
    assert when.ago(5) == "5 s ago" and when.ago(125) == "2 min ago" and when.ago(90000) == "1 d ago"
    assert when.stamp(0, now=3600) == "1970-01-01T00:00:00Z (1 h ago)"
    assert when.stamp(7200, now=0) == "1970-01-01T02:00:00Z (2 h in the future)"  # not "0 s ago"
    for odd in (float("nan"), float("inf"), 1e20, -1e20):  # a torn record: no traceback
        assert when.stamp(odd) == f"{odd!r} (not a time)"
    assert when.readable({"started": 1e20})["started"] == "1e+20 (not a time)"
    ticks = process_start(os.getpid())
    assert abs(when.from_ticks(ticks) - time.time()) < 7 * 86400


def test_plain_progress_lines_outside_a_terminal(tmp_path):
    log = (tmp_path / "log").open("w+")
    console = Console(file=log, force_terminal=False)
    with cli_progress.progress(console, "up x") as update:
        for t in range(30):
            update(f"waiting for health ({t} s)")  # a heartbeat, not 30 lines
        update("waiting for models (31 s)")
        update("code/a: 1/2 100.0 tok/s")
        update("code/a: 2/2 101.0 tok/s")  # one line per request, however alike
    log.seek(0)
    lines = log.read().splitlines()
    assert lines == [
        "up x: started",
        "up x: waiting for health (0 s)",
        "up x: waiting for models (31 s)",
        "up x: code/a: 1/2 100.0 tok/s",
        "up x: code/a: 2/2 101.0 tok/s",
    ]


def test_tests_keep_their_own_seat_home():
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "seatkit"
    home = paths.seat_home()
    assert home != default and not str(home).startswith(str(default))
    assert (home / "venvs").is_symlink()  # the slow runtime is shared, read through a link
    assert not (home / "run").is_symlink() and not (home / "keys").is_symlink()


def test_a_torn_run_record_is_a_clear_error(home):
    record = home / "run" / "cpu-smoke.json"
    record.parent.mkdir()
    record.write_text('{"profile": "cpu-smoke", "runtime": "nat')
    with pytest.raises(SeatError, match="run record .* is unreadable"):
        launch.status("cpu-smoke")


@pytest.mark.parametrize(
    "gpus, said, expected",
    [
        ([0], 'could not select device driver "" with capabilities: [[gpu]]', "no NVIDIA container runtime"),
        (
            [0],
            "nvidia-container-cli: initialization error: driver not loaded",
            "could not give this container GPUs",
        ),
        (
            [],
            "No such image: nvidia/cuda:12.8-base",
            "docker refused to start the seat: No such image: nvidia",
        ),
        (
            [0],
            "Conflict: the name /nvidia-seat is already in use",
            "docker refused to start the seat: Conflict",
        ),
    ],
)
def test_docker_refusals_are_named_for_what_they_are(monkeypatch, home, gpus, said, expected):
    """Only the engine's own words for a missing GPU runtime read as one; a name that merely holds
    'nvidia' is docker's refusal, as docker said it."""
    from docker.errors import APIError

    class Container:
        id = "ab" * 32

        def start(self):
            raise APIError("500 Server Error", explanation=said)

    class Containers:
        def create(self, *args, **kwargs):
            return Container()

    monkeypatch.setattr(engine, "client", lambda: type("Client", (), {"containers": Containers()})())
    path = home / "seat.yaml"
    path.write_text(f"extends: {profiles.DEFAULT_PROFILE}\ndocker: {{gpus: {gpus}}}\n")
    spec = specs.build(profiles.load(str(path)))
    values = {**spec.values({}), "SEAT_IMAGE": "x", "SEAT_CONTAINER": "nvidia-seat"}
    run = launch.Running("seat", "docker", "", "http://127.0.0.1:9", "m", str(home / "log"), time.time())
    with pytest.raises(SeatError, match=re.escape(expected)):
        create_and_start(spec, values, {}, run, launch._record)
    assert launch.recorded("seat").ident == Container.id  # recorded before it started


@pytest.mark.parametrize("restart", ["no", "on-failure", "unless-stopped", "always"])
def test_the_profiles_restart_policy_is_given_to_the_engine_explicitly(monkeypatch, home, restart):
    """ "no" too: a policy left out is the engine's default, which could restart a stopped seat."""
    made = {}

    class Container:
        id = "ab" * 32
        attrs = {"State": {"StartedAt": "T0"}}

        def start(self):
            pass

    class Containers:
        def create(self, *args, **kwargs):
            made.update(kwargs)
            return Container()

        def get(self, ident):
            return Container()

    monkeypatch.setattr(engine, "client", lambda: type("Client", (), {"containers": Containers()})())
    path = home / "seat.yaml"
    path.write_text(f"extends: cpu-smoke-docker\ndocker: {{restart: '{restart}'}}\n")
    spec = specs.build(profiles.load(str(path)))
    values = {**spec.values({}), "SEAT_IMAGE": "x"}
    run = launch.Running("seat", "docker", "", "http://127.0.0.1:9", "m", str(home / "log"), time.time())
    create_and_start(spec, values, {}, run, launch._record)
    assert made["restart_policy"] == {"Name": restart}


def held_by(monkeypatch, labels: dict | None, status: str = "exited", create_refusal=None):
    """An engine where a container (labels None: none) holds every name; create refused as given."""
    from docker.errors import NotFound

    class Holder:
        short_id = "0123456789ab"

    Holder.labels, Holder.status = labels, status

    class Containers:
        def get(self, name):
            if labels is None:
                raise NotFound("No such container")
            return Holder()

        def create(self, *args, **kwargs):
            raise create_refusal

    monkeypatch.setattr(engine, "client", lambda: type("Client", (), {"containers": Containers()})())


@pytest.mark.parametrize(
    "marks, status, said, hint",
    [
        (
            {"seatkit.profile": "other", "seatkit.home": "HOME"},
            "exited",
            "(exited, 0123456789ab): this SEAT_HOME's seat of other",
            "seat down other, or set SEAT_CONTAINER to another name",
        ),
        (
            {"seatkit.profile": "other", "seatkit.home": "/elsewhere"},
            "exited",
            "(exited, 0123456789ab): a seat of other that no `seat up` of this SEAT_HOME started",
            "docker rm seat-x if it is not wanted, or set SEAT_CONTAINER to another name",
        ),
        (
            {"seatkit.profile": "cpu-smoke-docker"},  # the serve script's and compose's label
            "running",
            "(running, 0123456789ab): a seat of cpu-smoke-docker that no `seat up`",
            "docker stop seat-x, then docker rm seat-x if it is not wanted",
        ),
        ({}, "created", "(created, 0123456789ab): not the kit's", "docker rm seat-x if it is not wanted"),
        (
            {"seatkit.profile": "a\nb"},  # a label can fake no line of its own
            "exited",
            "a seat of a\\nb that",
            "docker rm seat-x",
        ),
    ],
)
def test_whoever_holds_the_seats_name_is_named_with_its_state_and_how_to_free_it(
    monkeypatch, home, marks, status, said, hint
):
    marks = {k: str(paths.seat_home().resolve()) if v == "HOME" else v for k, v in marks.items()}
    held_by(monkeypatch, marks, status)
    taken = docker_backend.name_taken("seat-x")
    assert taken.message.startswith("a container named seat-x already exists ") and said in taken.message
    assert taken.hint.startswith(hint)


def test_a_free_name_is_not_taken(monkeypatch, home):
    held_by(monkeypatch, None)
    assert docker_backend.name_taken("seat-x") is None


@pytest.mark.parametrize("holder", [{}, None])
def test_a_create_refused_for_a_taken_name_says_whose_it_is_not_conflict(monkeypatch, home, holder):
    """Taken after preflight looked: the engine's 409 becomes who holds the name; gone again by
    the time it is asked, the refusal is docker's own words."""
    from docker.errors import APIError

    response = type("Response", (), {"status_code": 409, "reason": "Conflict"})()
    held_by(monkeypatch, holder, create_refusal=APIError("409", response=response, explanation="Conflict"))
    spec = specs.build(profiles.load("cpu-smoke-docker"))
    values = {**spec.values({}), "SEAT_IMAGE": "x", "SEAT_CONTAINER": "seat-x"}
    run = launch.Running("seat", "docker", "", "http://127.0.0.1:9", "m", str(home / "log"), time.time())
    with pytest.raises(SeatError) as caught:
        create_and_start(spec, values, {}, run, launch._record)
    if holder is None:
        assert caught.value.message == "docker refused to start the seat: Conflict"
    else:
        assert caught.value.message.endswith("(exited, 0123456789ab): not the kit's")
        assert caught.value.hint.startswith("docker rm seat-x")
    assert launch.recorded("seat") is None


def test_a_second_seat_up_while_one_is_starting_is_refused_and_starts_nothing(home, monkeypatch):
    """Two `seat up` of one profile at once used to both find it down and both start a server."""
    started = []
    monkeypatch.setattr(native, "spawn", lambda *args: started.append(args) or "1")
    spec = specs.build(profiles.load("cpu-smoke"))
    with flock.exclusive(
        layout.run_record("cpu-smoke").with_suffix(".lock"), "seat up cpu-smoke", "busy", ""
    ):
        with pytest.raises(
            SeatError,
            match=rf"another `seat up cpu-smoke` is starting it: pid {os.getpid()} "
            r"\(seat up cpu-smoke, since",
        ) as caught:
            launch.up(spec)
    assert started == [] and launch.recorded("cpu-smoke") is None
    assert "seat status cpu-smoke" in caught.value.hint


def test_down_of_a_seat_that_already_ended_says_so_and_finds_it_by_path(home, tmp_path):
    """A seat started by path is found by the same path; a server that had ended is not 'stopped'."""
    from seatkit.cli.app import seat

    path = tmp_path / "my-seat.yaml"
    path.write_text("extends: cpu-smoke\n")
    gone = subprocess.Popen(["true"])
    gone.wait()
    launch._record(
        launch.Running(
            "my-seat",
            "native",
            str(gone.pid),
            "http://127.0.0.1:9",
            "tiny",
            str(home / "log"),
            time.time(),
            since="12345",
        )
    )
    status = CliRunner().invoke(seat, ["status", str(path), "--json"])
    assert json.loads(status.output)["ident"] == str(gone.pid)
    done = CliRunner().invoke(seat, ["down", str(path)])
    shown = " ".join(done.output.split())
    assert done.exit_code == 0 and shown.startswith("my-seat had already stopped (process id ")
    assert launch.recorded("my-seat") is None


@pytest.mark.parametrize("fields", [{"ident": None}, {"pid": 5}])  # a field missing, one of another kit
def test_a_run_record_of_the_wrong_shape_is_a_clear_error(home, fields, capsys):
    """Through the `seat` entry point in this process (an uncaught exception fails the test); the
    installed executable's own start: the test below."""
    write_record(home, fields)
    for command in (["status", "cpu-smoke"], ["down", "cpu-smoke"], ["logs", "cpu-smoke"]):
        with pytest.raises(SystemExit) as exit:
            app.main(command)
        said = capsys.readouterr().err
        assert exit.value.code == 1 and "is unreadable" in said, said


def test_a_run_record_of_the_wrong_shape_is_a_clear_error_from_the_installed_seat(home):
    write_record(home, {"ident": "12; rm -rf /"})
    for command in (["status", "cpu-smoke"], ["down", "cpu-smoke"], ["logs", "cpu-smoke"]):
        done = seat_cli(command, home)
        assert done.returncode == 1 and "is unreadable" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def write_record(home, fields):
    """cpu-smoke's run record, with these fields changed."""
    record = {
        "profile": "cpu-smoke",
        "runtime": "native",
        "ident": "2",
        "url": "http://127.0.0.1:9",
        "model": "m",
        "log": str(home / "log"),
        "started": 1.0,
        **fields,
    }
    record = {name: value for name, value in fields.items() if value is not None}
    (home / "run").mkdir()
    (home / "run" / "cpu-smoke.json").write_text(json.dumps(record))


def test_down_stops_a_seat_whose_record_the_kit_before_this_one_wrote(home):
    """A seat started by the kit before this one, still running after the upgrade, is stopped by
    `seat down`. Reproduction: the record as the previous kit wrote it (its Running had the fields
    profile_sha256 and model_locks, since moved into provenance) for a live process of this boot;
    `seat down cpu-smoke` exits 1 with "the run record ... is unreadable (Running.__init__() got an
    unexpected keyword argument 'profile_sha256')" and tells the operator to stop it by hand."""
    seat = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        record = {
            "profile": "cpu-smoke",
            "runtime": "native",
            "ident": str(seat.pid),
            "url": "http://127.0.0.1:9",
            "model": "m",
            "log": str(home / "log"),
            "started": time.time(),
            "since": process_start(seat.pid),
            "boot": native.boot_id(),
            "token": "ab" * 16,
            "profile_sha256": "0" * 64,
            "profile_source": str(REPO / "profiles" / "cpu-smoke.yaml"),
            "model_locks": None,
            "provenance": {"differs": []},
        }
        (home / "run").mkdir()
        (home / "run" / "cpu-smoke.json").write_text(json.dumps(record))
        done = seat_cli(["down", "cpu-smoke"], home)
        assert done.returncode == 0, done.stderr
        assert "__init__" not in done.stderr and "keyword argument" not in done.stderr
        assert seat.wait(timeout=30) is not None  # stopped
    finally:
        if seat.poll() is None:
            seat.kill()
            seat.wait()


def test_logs_of_a_native_seat_whose_log_is_gone_is_a_clear_error(home):
    launch._record(
        launch.Running(
            "cpu-smoke",
            "native",
            str(os.getpid()),
            "http://127.0.0.1:9",
            "m",
            str(home / "logs" / "gone.log"),
            time.time(),
            since=process_start(os.getpid()),
        )
    )
    done = seat_cli(["logs", "cpu-smoke"], home)
    assert done.returncode == 1 and "the log of cpu-smoke cannot be read" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_a_docker_engine_every_command_says_so_without_a_traceback(home, tmp_path):
    launch._record(
        launch.Running(
            profiles.DEFAULT_PROFILE,
            "docker",
            "ab" * 32,
            "http://127.0.0.1:9",
            "m",
            str(home / "log"),
            time.time(),
        )
    )
    nowhere = {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    for command in (
        ["status"],
        ["logs"],
        ["down"],
        ["image", "inspect", "seat:x"],
        ["overlay", "verify", "--image", "seat:x"],
    ):
        done = seat_cli(command, home, **nowhere)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert "no docker engine answers" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert launch.recorded(profiles.DEFAULT_PROFILE) is not None  # nothing stopped: the record stays


def test_a_failure_on_the_way_out_with_the_engine_gone_keeps_the_record(home, tmp_path, monkeypatch):
    """`seat up` interrupted while the engine is away: saving the log and stopping fail quietly,
    and the record stays for `seat down` once the engine is back."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    run = launch.Running(
        profiles.DEFAULT_PROFILE,
        "docker",
        "ab" * 32,
        "http://127.0.0.1:9",
        "m",
        str(home / "log"),
        time.time(),
    )
    launch._record(run)
    backends.of("docker").save_log(run)
    launch._stop_quietly(run)
    assert launch.recorded(profiles.DEFAULT_PROFILE) == run and not (home / "log").exists()


@pytest.mark.parametrize(
    "sig, code, said", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "aborted")]
)
def test_seat_up_killed_while_waiting_stops_what_it_started(home, sig, code, said):
    stand_in_server(home, "exec sleep 300")  # never ready
    path = home / "stand-in.yaml"  # cpu-smoke's lock pins it: the stand-in model has its sizes
    path.write_text("extends: cpu-smoke\n")
    seat_up = subprocess.Popen(
        [str(Path(sys.executable).parent / "seat"), "up", str(path)],
        env={**os.environ, "SEAT_HOME": str(home)},
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while launch.recorded("stand-in") is None and seat_up.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    started = launch.recorded("stand-in")
    assert started is not None and launch.alive(started), seat_up.stderr.read() if seat_up.poll() else ""
    seat_up.send_signal(sig)
    _, stderr = seat_up.communicate(timeout=60)
    assert seat_up.returncode == code and said in stderr and "Traceback" not in stderr, stderr
    assert not launch.alive(started) and launch.recorded("stand-in") is None


class OddEngine(BaseHTTPRequestHandler):
    """An engine that answers /_ping and /version, then hangs on or garbles everything else."""

    def do_GET(self):
        if self.path.endswith("/_ping"):
            body, kind = b"OK", "text/plain"
        elif self.path.endswith("/version"):
            body, kind = b'{"ApiVersion": "1.41", "Version": "20.10"}', "application/json"
        elif "hang" in self.server.mode:
            time.sleep(3)
            return
        else:
            body, kind = b"[1, 2, 3]", "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(params=["garbled", "hang"])
def odd_engine(request):
    """'hang' answers nothing for 3 s, then closes: a ReadTimeout for a client with a shorter
    timeout, a dropped connection for the CLI (whose timeout is the SDK's 60 s)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), OddEngine)
    server.mode = request.param
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_an_engine_that_hangs_or_garbles_is_named_not_a_traceback(odd_engine, home, monkeypatch):
    import docker

    client = docker.DockerClient(base_url=odd_engine, timeout=1)
    with pytest.raises(Exception) as raised:  # ReadTimeout, or the SDK's bare "Can't create Container"
        client.containers.get("ab" * 32)
    failure = engine.as_seat_error(raised.value)
    assert failure is not None and "the docker engine failed or did not answer" in failure.message
    assert engine.as_seat_error(ValueError("not the engine's")) is None
    launch._record(
        launch.Running(
            profiles.DEFAULT_PROFILE,
            "docker",
            "ab" * 32,
            "http://127.0.0.1:9",
            "m",
            str(home / "log"),
            time.time(),
        )
    )
    for command in (["image", "inspect", "busybox"], ["down"]):
        done = seat_cli(command, home, timeout=120, DOCKER_HOST=odd_engine)
        assert done.returncode == 1 and "the docker engine failed or did not answer" in done.stderr
        assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("host", ["tcp://127.0.0.1:99999", "unix:///dev/null"])
def test_a_docker_host_that_cannot_be_one_is_no_engine(home, host):
    done = seat_cli(["image", "inspect", "busybox"], home, DOCKER_HOST=host)
    assert (
        done.returncode == 1 and "no docker engine answers" in done.stderr and "Traceback" not in done.stderr
    )


@pytest.mark.parametrize("grace", ["nan", "inf", "1e30", "-1"])
def test_down_refuses_a_grace_that_is_no_number_of_seconds(home, grace):
    done = seat_cli(["down", "cpu-smoke", "--grace", grace], home)
    assert done.returncode == 2 and "Invalid value for '--grace'" in done.stderr


def test_a_second_ctrl_c_while_stopping_says_what_may_be_left(home, monkeypatch):
    run = launch.Running("cpu-smoke", "native", "1", "http://127.0.0.1:9", "m", str(home / "log"), 1.0)

    def interrupted(run, grace):
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "stop", interrupted)
    with pytest.raises(SeatError, match="interrupted while stopping cpu-smoke") as caught:
        launch._stop_quietly(run)
    assert caught.value.hint == "seat down cpu-smoke"


def test_down_of_a_native_profile_never_waits_on_docker(home):
    """An engine that accepts and never answers held `seat down cpu-smoke` for the SDK's 60 s."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        done = seat_cli(
            ["down", "cpu-smoke"], home, timeout=30, DOCKER_HOST=f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        )
    finally:
        silent.close()
    # Nothing to stop is the state asked for: exit 0, as `docker compose down` and `systemctl stop`.
    assert done.returncode == 0 and "nothing to stop: cpu-smoke is not running" in " ".join(
        done.stdout.split()
    )


def test_a_failed_up_that_cannot_stop_its_container_says_so(home, tmp_path, monkeypatch):
    """The engine went away while `seat up` waited: the wait ends, the stop cannot happen, and
    the message says the seat may still be there and how to stop it later."""
    run = launch.Running(
        profiles.DEFAULT_PROFILE,
        "docker",
        "ab" * 32,
        "http://127.0.0.1:9",
        "m",
        str(home / "log"),
        time.time(),
    )
    monkeypatch.setattr(launch, "_start", lambda spec, environ, image_check: launch._record(run) or run)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(SeatError) as caught:
        launch.up(specs.build(profiles.load(profiles.DEFAULT_PROFILE)))
    assert "no docker engine answers" in caught.value.message
    assert f"{profiles.DEFAULT_PROFILE} may still be there" in caught.value.message
    assert caught.value.hint.startswith(f"seat down {profiles.DEFAULT_PROFILE} once the engine answers")
    assert launch.recorded(profiles.DEFAULT_PROFILE) == run


def test_one_line_escapes_what_could_fake_a_line_or_reorder_one():
    from seatkit.text import one_line

    assert (
        one_line("fine\n  io.seatkit.lock = sha256:0 (verified)")
        == "fine\\n  io.seatkit.lock = sha256:0 (verified)"
    )
    assert one_line("a\u202eb\tc\x1b[2J") == "a\\u202eb\\tc\\x1b[2J"
    assert one_line("résumé, 東京") == "résumé, 東京"
