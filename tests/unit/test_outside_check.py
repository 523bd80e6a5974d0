"""The outside check's logic on a fake engine whose images are dicts of files (the integration tier
runs it on the real vLLM CPU image): what the image says about itself never counts."""

import base64
import hashlib
import io
import json
import tarfile
from pathlib import PurePosixPath

import pytest
import yaml
from docker.errors import NotFound

from seatkit import engine, paths
from seatkit.image import outside, tree, vouch, what_loads
from seatkit.seat import profiles, sections
from seatkit.seat.overlay_lock import Lock

VENV = "/opt/venv"
VLLM = f"{VENV}/lib/python3.11/site-packages/vllm"
SCRIPT = (
    f"#!{VENV}/bin/python\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
    "from vllm.entrypoints.cli.main import main\nif __name__ == '__main__':\n"
    "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n    sys.exit(main())\n"
).encode()
BASE = {
    "/bin/sh": b"dash",
    "/usr/bin/curl": b"curl",
    "/usr/lib/libiomp5.so": b"openmp",
    "/usr/bin/env": b"coreutils env",
    f"{VENV}/bin/vllm": SCRIPT,
    f"{VENV}/bin/python": ("link", "/usr/bin/python3.11"),
    "/usr/bin/python3.11": b"cpython",
    f"{VENV}/pyvenv.cfg": b"home = /usr/bin\ninclude-system-site-packages = false\n",
    f"{VLLM}/__init__.py": b"",
    f"{VLLM}/version.py": b"__version__ = '0.32'\n",
    f"{VLLM}/__pycache__/version.cpython-311.pyc": b"compiled",
}
LOCKED = b"__version__ = '0.32'\n# the overlay\n"
LOCK = Lock("/srv/overlay", "1" * 40, "vllm", "2" * 40, {"version.py": hashlib.sha256(LOCKED).hexdigest()})
PATH = "/usr/local/bin:/usr/bin:/bin"


def built(**changes) -> dict:
    """The image `seat build` makes from BASE: the locked file (without the base's bytecode of it),
    the kit's entrypoint."""
    files = {
        **BASE,
        f"{VLLM}/version.py": LOCKED,
        f"{VLLM}/__pycache__/version.cpython-311.pyc": None,
        "/opt/seatkit/entrypoint.sh": (paths.REPO / "image" / "entrypoint.sh").read_bytes(),
        "/opt/seatkit/health.sh": (paths.REPO / "image" / "health.sh").read_bytes(),
    }
    return {k: v for k, v in {**files, **changes}.items() if v is not None}


class Container:
    def __init__(self, fs, client):
        self.fs, self.client, self.id, self.short_id = fs, client, "c" * 64, "c" * 12
        self.read = []
        self.changes: list[dict] = []  # what was written into its layer (GET /containers/{id}/changes)

    def diff(self):
        return self.changes

    def _entries(self, path):
        return {k: v for k, v in self.fs.items() if k == path or k.startswith(path.rstrip("/") + "/")}

    def get_archive(self, path):
        found = self._entries(path)
        if not found:
            raise NotFound("no such path")
        self.read.append(path)
        top = PurePosixPath(path)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, data in sorted(found.items()):
                info = tarfile.TarInfo(str(PurePosixPath(top.name) / PurePosixPath(name).relative_to(top)))
                if isinstance(data, tuple):
                    info.type, info.linkname = tarfile.SYMTYPE, data[1]
                    tar.addfile(info)
                else:
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        return [buffer.getvalue()], {}

    def remove(self, force=False):
        pass


class Api:
    def __init__(self, client):
        self.client = client

    def _url(self, template, ident):
        return ident

    def head(self, ident, params):
        fs = self.client.by_id[ident].fs
        path = params["path"]
        is_dir = path not in fs and any(k.startswith(path + "/") for k in fs)
        stat = {"name": PurePosixPath(path).name, "mode": (1 << 31) if is_dir else 0o755}
        if isinstance(fs.get(path), tuple):  # as docker says of a link: where it points
            stat.update(mode=(1 << 27) | 0o777, linkTarget=fs[path][1])
        ok = path in fs or is_dir
        return type(
            "Answer",
            (),
            {
                "ok": ok,
                "headers": {"X-Docker-Container-Path-Stat": base64.b64encode(json.dumps(stat).encode())}
                if ok
                else {},
            },
        )


class Client:
    """images: ref -> (id, config, files)."""

    def __init__(self, images):
        self.images_by_ref = images
        self.by_id = {}
        self.api = Api(self)
        self.images = self
        self.containers = self

    def get(self, ref):
        if ref not in self.images_by_ref:
            raise NotFound(ref)
        ident, config, _ = self.images_by_ref[ref]
        return type("Image", (), {"id": ident, "attrs": {"Config": config}})

    def create(self, image, **kwargs):
        ref = next(r for r, (i, _, _) in self.images_by_ref.items() if image in (r, i))
        container = Container(self.images_by_ref[ref][2], self)
        container.id = f"c{len(self.by_id)}"
        self.by_id[container.id] = container
        return container


TAG = "seatkit/try:overlay-1"
CONFIG = {
    "Env": [f"PATH={VENV}/bin:{PATH}", "LD_PRELOAD=/usr/lib/libiomp5.so", f"SEAT_OVERLAY_DIR={VLLM}"],
    "Entrypoint": outside.ENTRYPOINT,
}
BASE_CONFIG = {"Env": [f"PATH={VENV}/bin:{PATH}", "LD_PRELOAD=/usr/lib/libiomp5.so"]}  # as vllm-cpu's
BUILT_FROM = ("base", "d", "sha256:" + "e" * 64)  # the base the profile pins (the fixture's "d")


@pytest.fixture
def profile(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    path = tmp_path / "try.yaml"
    path.write_text(
        yaml.safe_dump(
            {"extends": "cpu-smoke-docker", "image": {"overlay": True, "digest": "sha256:" + "b" * 64}}
        )
    )
    loaded = profiles.load(str(path))
    monkeypatch.setattr(outside.pins, "base_reference", lambda p, allow_unpinned=False: ("base", "d"))
    return loaded


def engine_with(
    monkeypatch, files, config=CONFIG, ident="sha256:" + "a" * 64, base=BASE, base_config=BASE_CONFIG
):
    client = Client({TAG: (ident, config, files), "base": ("sha256:" + "e" * 64, base_config, base)})
    monkeypatch.setattr(engine, "client", lambda: client)
    return client


def test_the_image_seat_build_recorded_is_verified_without_reading_its_files(profile, monkeypatch):
    client = engine_with(monkeypatch, {})  # no files at all: none may be read, only where mounts land
    outside.record(TAG, "sha256:" + "a" * 64, profile, LOCK, BUILT_FROM)
    verdict = outside.check(profile, TAG, LOCK)
    assert verdict.verified and "seat build" in verdict.how
    assert [c.read for c in client.by_id.values()] == [[]]


@pytest.mark.parametrize(
    "base, why",
    [
        (("base:tag", None, "sha256:" + "9" * 64), "built from a tag the profile has pinned since"),
        (("base", "c", "sha256:" + "9" * 64), "built on an earlier pin"),
        (None, "recorded before the kit recorded the base"),
    ],
)
def test_a_build_record_counts_only_for_the_base_the_profile_pins_now(profile, monkeypatch, base, why):
    """The record says what the overlay was laid on; a base other than today's pin is read from
    outside, where the tree is compared with the pinned base (here: the files differ from it)."""
    client = engine_with(monkeypatch, built(**{"/usr/bin/curl": b"another curl"}))
    outside.record(TAG, "sha256:" + "a" * 64, profile, LOCK, base or BUILT_FROM)
    if base is None:  # an old record: no base at all
        record = outside._record_path(TAG)
        old = json.loads(record.read_text())
        del old["base"]
        record.write_text(json.dumps(old))
    verdict = outside.check(profile, TAG, LOCK)
    assert verdict.how == "read from outside the image", why
    assert client.by_id, why  # its files were read
    assert any("/usr/bin/curl" in p for p in verdict.problems), verdict.problems


def test_an_image_built_from_an_unpinned_tag_says_so(profile, monkeypatch):
    monkeypatch.setattr(outside.pins, "base_reference", lambda p, allow_unpinned=False: ("base:tag", None))
    engine_with(monkeypatch, {})
    outside.record(TAG, "sha256:" + "a" * 64, profile, LOCK, ("base:tag", None, "sha256:" + "e" * 64))
    verdict = outside.check(profile, TAG, LOCK)
    assert verdict.verified and verdict.how.endswith("from the unpinned tag base:tag (eeeeeeeeeeee)")


def test_an_untouched_image_read_from_outside_is_verified(profile, monkeypatch):
    engine_with(monkeypatch, built())
    verdict = outside.check(profile, TAG, LOCK)
    assert verdict.problems == [] and verdict.how == "read from outside the image"


def test_a_rebuilt_image_with_a_decoy_copy_is_refused_whatever_it_points_at(profile, monkeypatch):
    decoy = "/opt/decoy/vllm"
    files = built(**{f"{VLLM}/version.py": LOCKED + b"EDITED = 1\n", f"{decoy}/version.py": LOCKED})
    config = {
        **CONFIG,
        "Env": [*BASE_CONFIG["Env"], f"SEAT_OVERLAY_DIR={decoy}"],
        "Labels": {"io.seatkit.overlay.dir": decoy},
    }
    client = engine_with(monkeypatch, files, config, ident="sha256:" + "f" * 64)
    outside.record(TAG, "sha256:" + "a" * 64, profile, LOCK, BUILT_FROM)  # what seat build made: another id
    verdict = outside.check(profile, TAG, LOCK)
    assert not verdict.verified and any("version.py" in p for p in verdict.problems)
    assert not any(decoy in read for c in client.by_id.values() for read in c.read)
    with pytest.raises(outside.SeatError, match="does not run the locked overlay"):
        vouch.image_check(profile, TAG)


@pytest.mark.parametrize(
    "changes, config, said",
    [
        (
            {"/srv/exp/bin/vllm": b"#!/bin/sh\nexec evil\n"},
            {"Env": [f"PATH=/srv/exp/bin:{VENV}/bin:{PATH}"]},
            "finds vllm at /srv/exp/bin/vllm",
        ),
        ({}, {"Env": [f"PATH={VENV}/bin:{PATH}", "PYTHONPATH=/srv/exp"]}, "(not the base's).PYTHONPATH"),
        (
            {},
            {"Env": [f"PATH={VENV}/bin:{PATH}", "LD_PRELOAD=/usr/lib/libiomp5.so:/srv/x.so"]},
            "(not the base's).LD_PRELOAD",
        ),
        (
            {"/usr/lib/libiomp5.so": b"another"},
            {},
            "/usr/lib/libiomp5.so (LD_PRELOAD, loaded into the server)",
        ),
        ({}, {"Entrypoint": ["/bin/sh", "-c"]}, "its entrypoint is"),
        ({"/opt/seatkit/entrypoint.sh": b'#!/bin/sh\nexec "$@"\n'}, {}, "not the kit's image/entrypoint.sh"),
        ({"/bin/sh": b"a shell that does more"}, {}, "/bin/sh (what runs the entrypoint"),
        (
            {
                f"{VENV}/bin/vllm": SCRIPT.replace(
                    b"from vllm.entrypoints", b"import evil\nfrom vllm.entrypoints"
                )
            },
            {},
            f"{VENV}/bin/vllm is not the base's",
        ),
        (
            {f"{VENV}/bin/vllm": SCRIPT.replace(f"#!{VENV}/bin/python".encode(), b"#!/srv/python")},
            {},
            "is not a script run by",
        ),
        ({}, {"Env": ["PATH=/srv/empty"]}, "finds no env"),
        ({f"{VENV}/bin/vllm": None, f"{VENV}/bin/vllm/__init__.py": b"evil"}, {}, "finds vllm at None"),
        ({"/usr/lib/python3.11/vllm.py": b"evil"}, {}, "imported as vllm before site-packages"),
        ({f"{VENV}/bin/vllm.py": b"evil"}, {}, "imported as vllm before site-packages"),
        (
            {f"{VENV}/lib/python3.11/site-packages/sitecustomize.py": b"import evil"},
            {},
            "runs at every start",
        ),
        ({"/usr/bin/python3.11": b"another interpreter"}, {}, "(the interpreter) is not the base's"),
        (
            {f"{VLLM}/__pycache__/version.cpython-311.pyc": b"planted bytecode"},
            {},
            "loaded instead of a locked file",
        ),
        (
            {f"{VLLM}/version.abi3.so": b"ELF"},
            {},
            "loaded instead of a locked file: " + f"{VLLM}/version.abi3.so",
        ),
        ({f"{VLLM}/version/__init__.py": b"x"}, {}, "loaded instead of a locked file"),
        ({f"{VLLM}/__init__.py": None}, {}, f"no vllm package at {VLLM}"),
        ({f"{VLLM}/version.py": None}, {}, "missing: version.py"),
        ({f"{VLLM}/version.py": ("link", "/etc/hostname")}, {}, "changed: version.py"),
    ],
)
def test_each_way_to_run_other_code_is_named(profile, monkeypatch, changes, config, said):
    engine_with(monkeypatch, built(**changes), {**CONFIG, **config})
    verdict = outside.check(profile, TAG, LOCK)
    assert any(said in p for p in verdict.problems), verdict.problems


def test_overlay_verify_without_a_profile_never_follows_the_images_label(profile, monkeypatch):
    """`seat overlay verify --image` looked where io.seatkit.overlay.dir said; now where seat build put it."""
    from seatkit.image import build

    decoy = "/opt/decoy/vllm"
    files = built(**{f"{VLLM}/version.py": LOCKED + b"EDITED = 1\n", f"{decoy}/version.py": LOCKED})
    client = engine_with(monkeypatch, files)
    image = type("Image", (), {"id": "x", "labels": {"io.seatkit.overlay.dir": decoy}})
    monkeypatch.setattr(client, "get", lambda ref: image)
    outside.record(TAG, "sha256:" + "a" * 64, profile, LOCK, BUILT_FROM)
    assert build.verify_installed(TAG, None, False, LOCK)["changed"] == ["version.py"]


def test_seat_up_runs_an_overlay_image_only_by_the_id_the_outside_check_verified(tmp_path, monkeypatch):
    """launch.up without an outside check refuses; with one, the container is made from the id it
    verified, never from the tag, which could be moved meanwhile."""
    from seatkit.errors import SeatError
    from seatkit.serve import launch, preflight
    from seatkit.serve import spec as specs

    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    made = []

    class Containers:
        def create(self, image, *args, **kwargs):
            made.append(image)
            raise SeatError("stop here")

    monkeypatch.setattr(engine, "client", lambda: type("Client", (), {"containers": Containers()})())
    monkeypatch.setattr(preflight, "run", lambda spec, values: None)
    spec = specs.build(profiles.load(profiles.DEFAULT_PROFILE))
    environ = {"SEAT_IMAGE": TAG}
    with pytest.raises(SeatError, match="nothing checked it from outside"):
        launch._start(spec, environ)
    with pytest.raises(SeatError, match="stop here"):
        launch._start(spec, environ, lambda profile, image: ("sha256:" + "a" * 64, None))
    assert made == ["sha256:" + "a" * 64]


SITE = PurePosixPath(VLLM).parent


@pytest.mark.parametrize(
    "links, target, lands",
    [
        ({"/data": ("link", str(SITE))}, "/data/zz-hook.pth", f"{SITE}/zz-hook.pth"),
        ({"/scratch": ("link", "opt/venv/bin")}, "/scratch", f"{VENV}/bin"),
        (
            {"/srv": ("link", "/opt"), "/opt/venv-data": ("link", "venv/lib")},
            "/srv/venv-data/x",
            f"{VENV}/lib/x",
        ),
    ],
)
def test_a_mount_the_image_links_onto_the_import_path_is_refused(
    tmp_path, monkeypatch, profile, links, target, lands
):
    """docker resolves a mount target through the image's links: /data -> site-packages puts a
    mount of /data/zz-hook.pth where every start runs it, though the profile named /data."""
    mounted = profile.model_copy(
        update={
            "docker": profile.docker.model_copy(
                update={"extra_mounts": [sections.ExtraMount(source="/srv/exp", target=target)]}
            )
        }
    )
    engine_with(monkeypatch, built(**links), base={**BASE, **links})  # the base's own links
    verdict = outside.check(mounted, TAG, LOCK)
    assert any(f"docker.extra_mounts[0].target (at {lands} in this image)" in p for p in verdict.problems), (
        verdict.problems
    )


def test_a_mount_through_a_link_that_stays_off_the_import_path_is_fine(monkeypatch, profile):
    mounted = profile.model_copy(
        update={
            "docker": profile.docker.model_copy(
                update={"extra_mounts": [sections.ExtraMount(source="/srv/exp", target="/scratch/x")]}
            )
        }
    )
    link = {"/scratch": ("link", "/srv/scratch")}
    engine_with(monkeypatch, built(**link), base={**BASE, **link})
    assert outside.check(mounted, TAG, LOCK).problems == []


@pytest.mark.parametrize(
    "workdir, target",
    [
        (None, "/multiprocessing"),
        ("/workspace", "/workspace/types.py"),
        ("/workspace", "/workspace"),
        ("/workspace/seat", "/workspace"),
    ],
)
def test_a_mount_that_shadows_the_standard_library_for_spawned_workers_is_refused(
    monkeypatch, profile, workdir, target
):
    """`python -c 'from multiprocessing.spawn import ...'` (every spawned worker) searches the working
    directory first: a mount of /multiprocessing with the image's cwd at / runs in each worker."""
    mounted = profile.model_copy(
        update={
            "docker": profile.docker.model_copy(
                update={"extra_mounts": [sections.ExtraMount(source="/srv/exp", target=target)]}
            )
        }
    )
    cwd = {"WorkingDir": workdir or ""}  # the base's: the kit's Dockerfile sets none
    engine_with(monkeypatch, built(), {**CONFIG, **cwd}, base_config={**BASE_CONFIG, **cwd})
    assert any(
        "in the working directory" in p and target in p for p in outside.check(mounted, TAG, LOCK).problems
    )


@pytest.mark.parametrize(
    "workdir, target", [(None, "/scratch"), (None, "/srv/multiprocessing"), ("/workspace", "/types")]
)
def test_mounts_that_put_no_standard_library_name_in_the_working_directory_are_fine(
    monkeypatch, profile, workdir, target
):
    mounted = profile.model_copy(
        update={
            "docker": profile.docker.model_copy(
                update={"extra_mounts": [sections.ExtraMount(source="/srv/exp", target=target)]}
            )
        }
    )
    cwd = {"WorkingDir": workdir or ""}  # the base's: the kit's Dockerfile sets none
    engine_with(monkeypatch, built(), {**CONFIG, **cwd}, base_config={**BASE_CONFIG, **cwd})
    assert outside.check(mounted, TAG, LOCK).problems == []


HEALTH = {"Healthcheck": {"Test": what_loads.HEALTHCHECK, "Interval": 30_000_000_000}}


@pytest.mark.parametrize(
    "changes, config, said",
    [
        (
            {},
            {
                "Healthcheck": {
                    "Test": ["CMD-SHELL", "sed -i s/x/y/ /opt/venv/lib/python3.11/site-packages/vllm/x.py"]
                }
            },
            "its healthcheck runs",
        ),
        (
            {
                "/opt/seatkit/health.sh": b"#!/bin/sh\ncp /srv/evil.py /opt/venv/lib/python3.11/site-packages/vllm/\n"
            },
            HEALTH,
            "(the healthcheck) is not the kit's image/health.sh",
        ),
        (
            {"/usr/bin/curl": b"a curl that patches the package"},
            HEALTH,
            "/usr/bin/curl (what the healthcheck runs)",
        ),
        (
            {"/usr/local/bin/curl": b"a curl found first"},
            HEALTH,
            "/usr/local/bin/curl (what the healthcheck runs)",
        ),
    ],
)
def test_a_healthcheck_that_runs_other_code_in_the_seat_is_named(profile, monkeypatch, changes, config, said):
    """The engine runs the image's healthcheck inside the running seat every 30 s: a rebuilt image
    whose check edits the package after the start check passed ran other code, verified."""
    engine_with(monkeypatch, built(**changes), {**CONFIG, **config})
    verdict = outside.check(profile, TAG, LOCK)
    assert any(said in p for p in verdict.problems), verdict.problems


def test_the_kits_own_healthcheck_passes(profile, monkeypatch):
    engine_with(monkeypatch, built(), {**CONFIG, **HEALTH})
    assert outside.check(profile, TAG, LOCK).problems == []


# Every file the seat may run, against the base `seat build` pinned: what the image adds beyond the
# lock and the kit's scripts is code no lock pins.
STDLIB = "/usr/lib/python3.11"
THE_BASES = {
    **BASE,
    f"{STDLIB}/json/__init__.py": b"the standard library",
    f"{SITE}/torch/__init__.py": b"torch",
    f"{SITE}/torch/lib/libtorch_cpu.so": b"ELF torch",
    f"{SITE}/distutils-precedence.pth": b"import _distutils_hack",
}
PLUGIN = b"[vllm.general_plugins]\nhook = hook:register\n"


@pytest.mark.parametrize(
    "changes, said",
    [
        ({f"{SITE}/zz-hook.pth": b"import hook\n"}, f"{SITE}/zz-hook.pth (a .pth file: site runs it"),
        ({f"{SITE}/distutils-precedence.pth": b"import hook\n"}, "distutils-precedence.pth (a .pth file"),
        (
            {
                f"{SITE}/hook-1.0.dist-info/entry_points.txt": PLUGIN,
                f"{SITE}/hook.py": b"def register(): ...",
            },
            "hook-1.0.dist-info/entry_points.txt (entry points: vLLM imports its plugins",
        ),
        ({f"{VLLM}/hook.py": b"import os\n"}, f"{VLLM}/hook.py (in the vllm package, not in the lock)"),
        (
            {f"{VLLM}/__init__.py": b"import vllm.hook\n"},
            f"changed against the base base: {VLLM}/__init__.py",
        ),
        ({f"{STDLIB}/json/__init__.py": b"import hook"}, f"changed against the base base: {STDLIB}/json"),
        ({f"{STDLIB}/types.py": b"import hook"}, f"added against the base base: {STDLIB}/types.py"),
        ({f"{SITE}/torch/lib/libtorch_cpu.so": b"ELF other"}, "libtorch_cpu.so"),
        ({f"{SITE}/torch/__init__.py": None}, f"removed against the base base: {SITE}/torch/__init__.py"),
        ({"/usr/lib/x86_64-linux-gnu/libc.so.6": b"ELF"}, "added against the base base: /usr/lib/x86_64"),
        (
            {"/opt/seatkit/overlay.lock": b"# another lock\n"},
            "added against the base base: /opt/seatkit/overlay.lock",
        ),
        ({"/opt/seatkit/more.sh": b"#!/bin/sh\n"}, "added against the base base: /opt/seatkit/more.sh"),
        (
            {f"{SITE}/torch/__init__.py": ("link", "/srv/exp/torch.py")},
            f"changed against the base base: {SITE}",
        ),
    ],
)
def test_a_file_the_lock_does_not_pin_that_differs_from_the_base_is_named(
    profile, monkeypatch, changes, said
):
    """The image is not the one `seat build` recorded: the locked files matched, the entry script and
    interpreter were the base's, and yet a .pth file, a plugin's entry points, an unlisted vllm
    module or a changed library ran other code, verified."""
    files = {
        k: v
        for k, v in {**built(), **THE_BASES, f"{VLLM}/version.py": LOCKED, **changes}.items()
        if v is not None
    }
    engine_with(monkeypatch, files, base=THE_BASES)
    verdict = outside.check(profile, TAG, LOCK)
    assert any(said in p for p in verdict.problems), verdict.problems


def test_what_seat_build_adds_over_the_base_is_verified(profile, monkeypatch):
    """The locked file, the kit's scripts and the lock it copies: nothing else, nothing missing."""
    kit = {f"/opt/seatkit/{s}": (paths.REPO / "image" / s).read_bytes() for s in outside.tree.SCRIPTS}
    files = {
        **THE_BASES,
        f"{VLLM}/version.py": LOCKED,
        **kit,
        "/opt/seatkit/overlay.lock": LOCK.dump().encode(),
    }
    del files[f"{VLLM}/__pycache__/version.cpython-311.pyc"]  # stale: the build removes it
    client = engine_with(monkeypatch, files, base=THE_BASES)
    assert outside.check(profile, TAG, LOCK).problems == []
    scanned = [c for c in client.by_id.values() if "/" in c.read]
    assert outside.check(profile, TAG, LOCK).problems == []  # each id's files are read once, then kept
    assert [c for c in client.by_id.values() if "/" in c.read] == scanned and len(scanned) == 2


@pytest.mark.parametrize(
    "config, said",
    [
        (
            {"Env": [*CONFIG["Env"], "TORCHINDUCTOR_CACHE_DIR=/srv/exp"]},
            "env.TORCHINDUCTOR_CACHE_DIR is not the base's",
        ),
        ({"Env": [f"PATH={VENV}/bin:{PATH}", f"SEAT_OVERLAY_DIR={VLLM}"]}, "env.LD_PRELOAD is gone"),
        ({"WorkingDir": f"{SITE}/torch"}, "its working directory"),
        ({"User": "1000"}, "its user '1000' is not the base's"),
        ({"Volumes": {f"{SITE}/hook": {}}}, "its volumes"),
    ],
)
def test_a_configuration_the_kits_dockerfile_does_not_make_is_named(profile, monkeypatch, config, said):
    """The kit's Dockerfile adds three SEAT_ names to the base's env and keeps its user and working
    directory: any other env name can steer what runs (a compiled-kernel cache, a backend) beyond a list."""
    engine_with(monkeypatch, built(), {**CONFIG, **config})
    verdict = outside.check(profile, TAG, LOCK)
    assert any(said in p for p in verdict.problems), verdict.problems


def test_a_base_named_by_a_movable_tag_is_no_reference(profile, monkeypatch):
    """Unpinned, the base is whatever the tag names now: the image itself, retagged, would compare
    equal to its own files."""
    monkeypatch.setattr(outside.pins, "base_reference", lambda p, allow_unpinned=False: ("base", None))
    engine_with(monkeypatch, built(**{f"{SITE}/zz-hook.pth": b"import hook\n"}), base=built())
    verdict = outside.check(profile, TAG, LOCK)
    assert any("is not pinned by digest" in p for p in verdict.problems), verdict.problems


@pytest.mark.parametrize(
    "vllm_dir, cfg, said",
    [
        (f"{SITE}/vllm_decoy", None, "is not <venv>/lib/pythonX.Y/site-packages/vllm"),
        (
            VLLM,
            b"home = /usr/bin\nversion = 3.12.3\n",
            f"{VENV} runs python3.12: it imports no package from python3.11",
        ),
    ],
)
def test_a_vllm_dir_the_server_does_not_import_is_refused(profile, monkeypatch, vllm_dir, cfg, said):
    """The profile names where the overlay is checked: a copy of the locked files beside the package
    the server imports (or under another Python's site-packages) left the real one the base's."""
    decoy = {f"{vllm_dir}/{name}": LOCKED for name in LOCK.files} | {f"{vllm_dir}/__init__.py": b""}
    changes = {f"{VENV}/pyvenv.cfg": cfg} if cfg else {}
    base = {**BASE, **changes}
    engine_with(
        monkeypatch,
        {**built(), f"{VLLM}/version.py": BASE[f"{VLLM}/version.py"], **decoy, **changes},
        base=base,
    )
    moved = profile.model_copy(update={"image": profile.image.model_copy(update={"vllm_dir": vllm_dir})})
    verdict = outside.check(moved, TAG, LOCK)
    assert any(said in p for p in verdict.problems), verdict.problems


# The kit's command for the profile fixture (seatkit.serve.spec.container_argv, default knobs).
SERVE = [
    "env",
    "vllm",
    "serve",
    "/models-base",
    *("--host", "127.0.0.1", "--port", "18100", "--served-model-name", "tiny"),
    "--speculative-config",
    '{"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4,"prompt_lookup_min":2}',
    *("--load-format", "dummy", "--dtype", "bfloat16", "--max-model-len", "2048", "--max-num-seqs", "8"),
]


def running_container(monkeypatch, args=SERVE, mounts=("/models-base", "/cache"), changes=()):
    """A container of the verified image, started with args and mounts: `seat overlay verify
    --container` and doctor judge what it runs, not what the profile says today."""
    client = engine_with(monkeypatch, built())
    box = client.create(TAG)
    box.changes = list(changes)
    box.image = type("Image", (), {"id": "sha256:" + "a" * 64})
    box.attrs = {
        "Config": CONFIG,
        "Path": outside.ENTRYPOINT[0],
        "Args": list(args),
        "Mounts": [{"Destination": m} for m in mounts],
    }
    get = client.get
    monkeypatch.setattr(client, "get", lambda ref: box if ref == box.id else get(ref))
    return box.id


def test_a_container_started_as_the_profile_says_is_verified(profile, monkeypatch):
    assert outside.check(profile, running_container(monkeypatch), LOCK, is_container=True).problems == []


@pytest.mark.parametrize(
    "args, mounts, said",
    [
        (SERVE, ["/models-base", f"{SITE}/zz-hook.pth"], f"the container's mount {SITE}/zz-hook.pth"),
        (SERVE, [f"{VENV}/bin"], f"the container's mount {VENV}/bin"),
        ([*SERVE, "--trust-remote-code"], [], "the container's command: vllm_args.trust-remote-code"),
        ([*SERVE, "--worker-extension-cls", "hook.W"], [], "vllm_args.worker-extension-cls"),
        (["env", "-u", "PATH", *SERVE[1:]], [], "the container's command: env -u.PATH"),
        ([*SERVE, "--compilation-config", '{"backend": "hook.b"}'], [], "its backend loads"),
    ],
)
def test_a_container_started_otherwise_than_the_profile_says_today_is_named(
    profile, monkeypatch, args, mounts, said
):
    """A seat started from an experiment profile (a .pth mounted into site-packages, a remote-code
    flag), the profile edited back afterwards: the container was judged by today's profile, verified."""
    where = running_container(monkeypatch, args, mounts)
    verdict = outside.check(profile, where, LOCK, is_container=True)
    assert any(said in p for p in verdict.problems), verdict.problems


SITE_PACKAGES = f"{VENV}/lib/python3.11/site-packages"
# What the real vLLM CPU seat writes while it serves (docker diff of the test seat), folders too.
RUN_TIME = [
    {"Path": "/root", "Kind": 0},
    {"Path": "/root/.cache", "Kind": 1},
    {"Path": "/root/.cache/vllm/torch_compile_cache/x.py", "Kind": 1},
    {"Path": "/root/.config", "Kind": 1},
    {"Path": "/root/.config/vllm", "Kind": 1},
    {"Path": "/root/.config/vllm/usage_stats.json", "Kind": 1},
    {"Path": "/tmp", "Kind": 0},
    {"Path": "/tmp/torchinductor_root/ab/x.so", "Kind": 1},
    {"Path": "/models-base", "Kind": 1},  # docker makes the mount points
    {"Path": "/cache", "Kind": 1},
    {"Path": "/usr/sbin/docker-init", "Kind": 1},  # docker.init's binary, mounted at start
]


def test_what_a_serving_seat_writes_is_no_finding():
    assert tree.layer(RUN_TIME, VLLM, ["/models-base", "/cache"]) == []


@pytest.mark.parametrize(
    "path, kind, said",
    [
        (
            f"{SITE_PACKAGES}/zz-hook.pth",
            1,
            f"{SITE_PACKAGES}/zz-hook.pth (a .pth file: site runs it at every start) added",
        ),
        ("/tmp/zz-hook.pth", 1, "/tmp/zz-hook.pth (a .pth file"),  # a .pth wherever it is
        (
            f"{VLLM}/version.py",
            0,
            f"{VLLM}/version.py (in the vllm package, changed in the running container) changed",
        ),
        (f"{VLLM}/envs.py", 2, "removed"),
        (f"{SITE_PACKAGES}/six.py", 0, "(where Python imports packages from) changed"),
        ("/usr/lib/python3/dist-packages/hook.py", 1, "(where Python imports packages from) added"),
        (
            f"{SITE_PACKAGES}/hook-1.0.dist-info/entry_points.txt",
            1,
            "(entry points: vLLM imports its plugins",
        ),
        ("/etc/ld.so.preload", 1, "/etc/ld.so.preload (preloaded into every program) added"),
        ("/etc/ld.so.conf.d/hook.conf", 1, "(where the loader finds shared libraries) added"),
        ("/etc/ld.so.cache", 0, "(where the loader finds shared libraries) changed"),
        ("/opt/seatkit/entrypoint.sh", 0, "(the kit's start check and locks) changed"),
        ("/usr/bin/curl", 0, "/usr/bin/curl (where programs and libraries are loaded from) changed"),
        (f"{VENV}/bin/vllm", 0, "(where programs and libraries are loaded from)"),
        ("/usr/lib/x86_64-linux-gnu/libhook.so", 1, "(where programs and libraries are loaded from) added"),
        ("/usr/local/sbin/hook", 1, "(where programs and libraries are loaded from) added"),
        # Beyond the places named: the server could load it all the same (Debian's sitecustomize).
        ("/etc/python3.11/sitecustomize.py", 0, "/etc/python3.11/sitecustomize.py changed"),
        # The image sets PYTHONDONTWRITEBYTECODE: bytecode written into the seat is someone else's.
        (f"{VLLM}/__pycache__/envs.cpython-311.pyc", 0, "(in the vllm package, changed in the running"),
        (
            f"{SITE_PACKAGES}/torch/__pycache__/x.cpython-311.pyc",
            1,
            "(where Python imports packages from) added",
        ),
        ("/tmpx/hook.py", 1, "/tmpx/hook.py added"),  # /tmp's neighbour is not /tmp
        ("/cache-not/hook.py", 1, "/cache-not/hook.py added"),
    ],
)
def test_a_change_where_code_loads_from_is_a_finding(path, kind, said):
    found = tree.layer([*RUN_TIME, {"Path": path, "Kind": kind}], VLLM, ["/models-base", "/cache"])
    assert len(found) == 1 and said in found[0], found


def test_a_folder_is_judged_by_what_changed_in_it_and_a_removed_one_by_itself():
    folder = f"{SITE_PACKAGES}/hook"
    assert tree.layer([{"Path": folder, "Kind": 1}, {"Path": f"{folder}/__init__.py", "Kind": 1}], VLLM) == [
        f"{folder}/__init__.py (where Python imports packages from) added"
    ]
    assert tree.layer([{"Path": f"{VLLM}/v1", "Kind": 2}], VLLM) == [
        f"{VLLM}/v1 (in the vllm package, changed in the running container) removed"
    ]
    assert tree.layer(None, VLLM) == []  # the engine's answer for a layer nothing was written into


def test_a_container_written_into_after_its_start_is_not_verified(profile, monkeypatch):
    """Its image verified, its start check passed: a .pth docker cp'd into site-packages since."""
    clean = running_container(monkeypatch, changes=RUN_TIME)
    assert outside.check(profile, clean, LOCK, is_container=True).problems == []
    hooked = running_container(
        monkeypatch, changes=[*RUN_TIME, {"Path": f"{SITE_PACKAGES}/zz.pth", "Kind": 1}]
    )
    verdict = outside.check(profile, hooked, LOCK, is_container=True)
    assert verdict.problems == [f"{SITE_PACKAGES}/zz.pth (a .pth file: site runs it at every start) added"]


def test_only_a_real_mount_point_stands_for_its_folder_and_only_bytecode_for_a_cache():
    hook = {"Path": f"{SITE_PACKAGES}/hook.py", "Kind": 1}
    for mounts in ([""], ["/"], ["//"]):  # no engine says so; never a licence for the whole root
        assert tree.layer([hook], VLLM, mounts) == [
            f"{hook['Path']} (where Python imports packages from) added"
        ]
    planted = f"{SITE_PACKAGES}/torch/__pycache__/hook.py"  # no bytecode: a module, wherever it is
    assert tree.layer([{"Path": planted, "Kind": 1}], VLLM) == [
        f"{planted} (where Python imports packages from) added"
    ]


@pytest.mark.parametrize(
    "written, status", [([], "OK"), ([{"Path": f"{SITE_PACKAGES}/zz.pth", "Kind": 1}], "FAIL")]
)
def test_doctor_judges_the_running_seats_layer_and_says_to_make_a_new_container(
    profile, monkeypatch, written, status
):
    from seatkit.doctor import image
    from seatkit.serve import launch

    ident = running_container(monkeypatch, changes=[*RUN_TIME, *written])
    run = launch.Running(profile.name, "docker", ident, "http://127.0.0.1:9", "m", "log", 0.0)
    monkeypatch.setattr(outside, "lock_for", lambda image, default: LOCK)
    row = image.overlay(profile, TAG, run)
    assert row.status == status and row.evidence.startswith(f"container {ident[:12]}"), row
    if written:
        assert "zz.pth (a .pth file: site runs it at every start) added" in row.evidence
        assert row.fix.startswith(f"seat down {profile.name}, then seat up {profile.name}"), row.fix
