# ruff: noqa: F811  (profile: the fixture of test_outside_check, taken by name)
"""What of the image a mount may not cover, read from the image (the fake engine of
test_outside_check): the caches under the container's own HOME and cache names, the interpreter and
its prefix, the loader's folders, what OpenSSL's config names, and each protected path where the
image's links put it. A profile is judged at the usual places (/usr, /lib*, root's HOME); an image
that keeps them elsewhere ran planted code there while the outside check said verified."""

import pytest
from test_outside_check import (  # noqa: F401
    BASE,
    BASE_CONFIG,
    CONFIG,
    LOCK,
    TAG,
    VENV,
    built,
    engine_with,
    profile,
    running_container,
)

from seatkit.image import outside
from seatkit.seat import sections

PASSWD = b"root:x:0:0:root:/root:/bin/sh\nvllm:x:1000:1000::/home/vllm:/bin/sh\n"


def with_mount(profile, target):
    docker = profile.docker.model_copy(
        update={"extra_mounts": [sections.ExtraMount(source="/srv/exp", target=target)]}
    )
    return profile.model_copy(update={"docker": docker})


def problems_of(profile, monkeypatch, target, files=None, config=None):
    """The outside check's findings on the profile with one more mount, the base and the image
    alike in files and config besides the kit's own (so only the mount can be found)."""
    files, config = files or {}, config or {}
    env = [*BASE_CONFIG["Env"], *config.get("Env", [])]
    base_config = {**BASE_CONFIG, **config, "Env": env}
    image_config = {**CONFIG, **config, "Env": [*env, *CONFIG["Env"][len(BASE_CONFIG["Env"]) :]]}
    engine_with(monkeypatch, built(**files), image_config, base={**BASE, **files}, base_config=base_config)
    return outside.check(with_mount(profile, target), TAG, LOCK).problems


@pytest.mark.parametrize(
    "user, target, over",
    [
        ("vllm", "/home/vllm/.cache/vllm", "/home/vllm/.cache"),
        ("vllm:vllm", "/home/vllm/.triton", "/home/vllm/.triton"),
        ("1000", "/home/vllm/.nv/ComputeCache", "/home/vllm/.nv"),
        ("1000:1000", "/home/vllm/.cache/flashinfer", "/home/vllm/.cache"),
        ("vllm", "/home/vllm", "/home/vllm/.cache"),
        ("vllm", "/home", "/home/vllm/.cache"),
        ("", "/root/.cache/torch", "/root/.cache"),
    ],
)
def test_a_mount_over_a_cache_under_the_images_users_home_is_refused(
    profile, monkeypatch, user, target, over
):
    """The image runs as vllm (uid 1000), whose HOME docker takes from the image's /etc/passwd:
    vLLM, Triton, CUDA and FlashInfer read their compiled code from /home/vllm, not /root."""
    problems = problems_of(profile, monkeypatch, target, {"/etc/passwd": PASSWD}, {"User": user})
    assert any(f"{target}: it mounts over {over} (" in p for p in problems), problems


@pytest.mark.parametrize(
    "env, target, over",
    [
        ("HOME=/srv/home", "/srv/home/.cache", "/srv/home/.cache"),
        ("XDG_CACHE_HOME=/var/cache/seat", "/var/cache/seat/vllm", "/var/cache/seat"),
        ("TRITON_CACHE_DIR=/opt/triton-cache", "/opt/triton-cache", "/opt/triton-cache"),
        ("CUDA_CACHE_PATH=/var/nv", "/var", "/var/nv"),
        ("TMPDIR=/scratch", "/scratch/torchinductor_root", "/scratch/torchinductor_*"),
    ],
)
def test_a_mount_over_a_cache_the_images_env_places_is_refused(profile, monkeypatch, env, target, over):
    """The base image's own env moves a cache (the kit's Dockerfile sets none): it is judged there."""
    problems = problems_of(profile, monkeypatch, target, config={"Env": [env]})
    assert any(f"{target}: it mounts over {over} (" in p for p in problems), problems


def test_a_home_behind_a_link_is_judged_where_the_link_puts_it(profile, monkeypatch):
    files = {"/etc/passwd": PASSWD, "/home": ("link", "/var/home"), "/var/home/vllm/.profile": b""}
    problems = problems_of(profile, monkeypatch, "/var/home/vllm/.cache", files, {"User": "vllm"})
    assert any("it mounts over /var/home/vllm/.cache (" in p for p in problems), problems


@pytest.mark.parametrize("target", ["/home/vllm/models", "/home/other/.cache", "/scratch"])
def test_mounts_beside_the_images_caches_are_fine(profile, monkeypatch, target):
    files = {"/etc/passwd": PASSWD}
    assert problems_of(profile, monkeypatch, target, files, {"User": "vllm"}) == []


def test_caches_a_container_keeps_in_the_kits_cache_mount_are_the_kits(profile, monkeypatch):
    """A seat whose env puts HOME and Triton's cache into /cache: the kit's cache mount stays allowed."""
    where = running_container(monkeypatch)
    box = outside.engine.client().by_id[where]
    env = ["HOME=/cache/home", "TRITON_CACHE_DIR=/cache/triton", "XDG_CACHE_HOME=/cache"]
    box.attrs["Config"] = {**CONFIG, "Env": [*CONFIG["Env"], *env]}
    assert outside.check(profile, where, LOCK, is_container=True).problems == []


CONDA = {
    f"{VENV}/bin/python": ("link", "/opt/conda/bin/python3.11"),
    "/opt/conda/bin/python3.11": b"cpython",
    "/opt/conda/lib/python3.11/os.py": b"",
    "/opt/conda/ssl/openssl.cnf": b"",
    f"{VENV}/pyvenv.cfg": b"home = /opt/conda/bin\ninclude-system-site-packages = false\n",
}
VERSIONED = {  # /opt/python, a link to the release the image installed
    f"{VENV}/bin/python": ("link", "/opt/python/bin/python3.11"),
    "/opt/python": ("link", "python-3.11.9"),
    "/opt/python-3.11.9/bin/python3.11": b"cpython",
    f"{VENV}/pyvenv.cfg": b"home = /opt/python/bin\n",
}


@pytest.mark.parametrize(
    "files, target, over",
    [
        (CONDA, "/opt/conda/bin/python3.11", "/opt/conda/bin/python3.11 (the interpreter"),
        (CONDA, "/opt/conda/lib/python3.11", "/opt/conda (the interpreter's prefix"),
        (CONDA, "/opt/conda/include/python3.11", "/opt/conda (the interpreter's prefix"),
        (CONDA, "/opt/conda/ssl/openssl.cnf", "/opt/conda (the interpreter's prefix"),
        (CONDA, "/opt/conda/lib/libpython3.11.so.1.0", "/opt/conda (the interpreter's prefix"),
        (VERSIONED, "/opt/python-3.11.9/lib/python3.11", "/opt/python-3.11.9 (the interpreter's prefix"),
        (VERSIONED, "/opt/python/lib", "/opt/python-3.11.9 (the interpreter's prefix"),
    ],
)
def test_a_mount_over_an_interpreter_outside_usr_is_refused(profile, monkeypatch, files, target, over):
    """The venv's python is conda's (or a release behind a link): its standard library, the headers
    Triton's launcher compiles with, libpython and conda's OpenSSL config are all under its prefix,
    which no fixed list names; the outside check resolved it, and judges mounts against it."""
    problems = problems_of(profile, monkeypatch, target, files)
    assert any(
        p.startswith("docker.extra_mounts[0].target") and f": it mounts over {over}" in p for p in problems
    )


def ld_cache(*libraries: str) -> bytes:
    """An /etc/ld.so.cache in glibc's format: a 48-byte header, 24-byte entries, then the strings."""
    strings, offsets = b"", []
    start = 48 + 24 * len(libraries)
    for path in libraries:
        offsets.append(start + len(strings))
        strings += path.encode() + b"\0"
    header = (
        b"glibc-ld.so.cache1.1" + len(libraries).to_bytes(4, "little") + len(strings).to_bytes(4, "little")
    )
    header += bytes(48 - len(header))
    entries = b"".join((3).to_bytes(4, "little") + o.to_bytes(4, "little") * 2 + bytes(12) for o in offsets)
    return header + entries + strings


LOADER = {
    "/etc/ld.so.conf": b"include /etc/ld.so.conf.d/*.conf\n",
    "/etc/ld.so.conf.d/hpcx.conf": b"# HPC-X\n/opt/hpcx/ucx/lib\n",
    "/etc/ld.so.conf.d/notes.txt": b"/opt/not-a-conf\n",
    "/etc/ld.so.cache": ld_cache("/lib/x86_64-linux-gnu/libc.so.6", "/opt/cuda-compat/lib/libcuda.so.1"),
}


@pytest.mark.parametrize(
    "env, target, over",
    [
        (None, "/opt/hpcx", "/opt/hpcx/ucx/lib (where the loader"),
        (None, "/opt/cuda-compat/lib/libcuda.so.1", "/opt/cuda-compat/lib (where the loader"),
        (
            "LD_LIBRARY_PATH=/opt/nvidia/lib:/opt/nvidia/lib64",
            "/opt/nvidia/lib64",
            "/opt/nvidia/lib64 (where the loader",
        ),
        (
            "LD_PRELOAD=/opt/jemalloc/libjemalloc.so",
            "/opt/jemalloc",
            "/opt/jemalloc/libjemalloc.so (a library",
        ),
    ],
)
def test_a_mount_over_where_the_loader_finds_libraries_is_refused(profile, monkeypatch, env, target, over):
    """The loader takes the server's shared libraries from the folders its cache lists, those of
    ld.so.conf (ldconfig rebuilds the cache from them in each GPU container) and LD_LIBRARY_PATH's:
    /opt/hpcx or a CUDA compat folder are none of the fixed list's."""
    config = {"Env": [env]} if env else {}
    problems = problems_of(profile, monkeypatch, target, LOADER, config)
    assert any(f"{target}: it mounts over {over}" in p for p in problems), problems


@pytest.mark.parametrize(
    "libraries, workdir, target, over",
    [
        (":/opt/x/lib", None, "/libcuda.so.1", "/*.so*"),
        ("/opt/x/lib:", None, "/glibc-hwcaps", "/glibc-hwcaps"),
        ("lib:/opt/x/lib", "/workspace", "/workspace/lib/libnccl.so.2", "/workspace/lib"),
    ],
)
def test_a_mount_where_a_relative_ld_library_path_entry_looks_is_refused(
    profile, monkeypatch, libraries, workdir, target, over
):
    """An empty or relative LD_LIBRARY_PATH entry (a Dockerfile's trailing ':') makes the loader
    look in the working directory: a library mounted there is loaded into the server."""
    config = {"Env": [f"LD_LIBRARY_PATH={libraries}"], "WorkingDir": workdir or ""}
    problems = problems_of(profile, monkeypatch, target, config=config)
    assert any(f": it mounts over {over} (where the loader" in p for p in problems), problems


def test_a_relative_ld_library_path_entry_leaves_the_kits_own_mounts_allowed(profile, monkeypatch):
    """The working directory at / is no reason to refuse /models-base, /cache or /scratch."""
    config = {"Env": ["LD_LIBRARY_PATH=/opt/x/lib:"]}
    assert problems_of(profile, monkeypatch, "/scratch", config=config) == []


@pytest.mark.parametrize("target", ["/opt/other", "/opt/conda-data", "/opt/not-a-conf", "/srv/models"])
def test_mounts_beside_the_interpreter_and_the_loaders_folders_are_fine(profile, monkeypatch, target):
    """The kit's own mounts (/models-base, /cache) and others beside: no finding."""
    assert problems_of(profile, monkeypatch, target, {**CONDA, **LOADER}) == []


OPENSSL = {
    "/usr/lib/ssl/openssl.cnf": ("link", "/etc/ssl/openssl.cnf"),  # Debian's OPENSSLDIR
    "/etc/ssl/openssl.cnf": b"""openssl_conf = init
.include /etc/ssl/openssl.d
[init]
providers = provider_sect
engines = engine_sect
[provider_sect]
fips = fips_sect
[fips_sect]
module = /opt/fips/fips.so  # loaded into the server
[engine_sect]
pkcs11 = pkcs11_sect
[pkcs11_sect]
dynamic_path = "/opt/pkcs11/engine.so"
MODULE_PATH = /opt/hsm/lib/libhsm.so
[cmp]
recipient = "/C=FI/O=Insta Demo/CN=Insta Demo CA"
certs = $dir/certs
""",
    "/etc/ssl/openssl.d/extra.cnf": b"[extra_sect]\nmodule = /opt/extra/provider.so\n",
    "/etc/ssl/openssl.d/notes.txt": b"module = /opt/not-read/x.so\n",
}


@pytest.mark.parametrize(
    "env, target, over",
    [
        (None, "/opt/fips", "/opt/fips/fips.so (named by OpenSSL's config"),
        (None, "/opt/pkcs11/engine.so", "/opt/pkcs11/engine.so (named by OpenSSL's config"),
        (None, "/opt/hsm/lib", "/opt/hsm/lib/libhsm.so (named by OpenSSL's config"),
        (None, "/etc/ssl/openssl.d", "/etc/ssl/openssl.d (named by OpenSSL's config"),
        (None, "/opt/extra", "/opt/extra/provider.so (named by OpenSSL's config"),
        ("OPENSSL_CONF=/opt/tls/site.cnf", "/opt/tls", "/opt/tls/site.cnf (OpenSSL's"),
        ("OPENSSL_MODULES=/opt/ossl-modules", "/opt/ossl-modules/legacy.so", "/opt/ossl-modules (OpenSSL's"),
    ],
)
def test_a_mount_over_what_openssls_config_loads_is_refused(profile, monkeypatch, env, target, over):
    """Python's ssl reads OpenSSL's config at import, and OpenSSL loads the providers, engines and
    pkcs11 modules it (or a file it includes) names into the server, wherever they are."""
    config = {"Env": [env]} if env else {}
    problems = problems_of(profile, monkeypatch, target, OPENSSL, config)
    assert any(f": it mounts over {over}" in p for p in problems), problems


def test_a_conda_openssl_config_is_read_under_the_interpreters_prefix(profile, monkeypatch):
    files = {**CONDA, "/opt/conda/ssl/openssl.cnf": b"[p]\nmodule = /opt/provider/p.so\n"}
    problems = problems_of(profile, monkeypatch, "/opt/provider", files)
    assert any(": it mounts over /opt/provider/p.so (named by OpenSSL's config" in p for p in problems)


@pytest.mark.parametrize("target", ["/opt/not-read", "/C=FI", "/opt/other"])
def test_what_openssls_config_does_not_name_stays_allowed(profile, monkeypatch, target):
    """A distinguished name (/C=FI/...) is no path, nor is a file beside the included .cnf ones."""
    assert problems_of(profile, monkeypatch, target, OPENSSL) == []


B12X = sections.Image.model_fields["b12x_dir"].default  # cpu-smoke-docker's image.b12x_dir


@pytest.mark.parametrize(
    "files, target, over",
    [
        (  # busybox images: env is a link to one program, which runs the server
            {"/usr/bin/env": ("link", "/opt/busybox/bin/busybox"), "/opt/busybox/bin/busybox": b"busybox"},
            "/opt/busybox",
            "/opt/busybox/bin/busybox (a program that starts the server",
        ),
        (
            {"/usr/bin/curl": ("link", "/opt/tools/curl"), "/opt/tools/curl": b"curl"},
            "/opt/tools/curl",
            "/opt/tools/curl (a program that starts the server or checks it",
        ),
        (
            {B12X: ("link", "/opt/kernels/b12x"), "/opt/kernels/b12x/__init__.py": b""},
            "/opt/kernels/b12x/gemm.py",
            "/opt/kernels/b12x (the b12x package",
        ),
        (
            {"/etc/nsswitch.conf": ("link", "/opt/conf/nsswitch.conf"), "/opt/conf/nsswitch.conf": b""},
            "/opt/conf",
            "/opt/conf/nsswitch.conf (the NSS modules",
        ),
    ],
)
def test_a_mount_where_the_images_links_put_a_protected_path_is_refused(
    profile, monkeypatch, files, target, over
):
    """env, the healthcheck's curl, the profile's b12x package and the loader's NSS config are judged
    where the image's links put them: a mount over the link's end replaces what the link names."""
    problems = problems_of(profile, monkeypatch, target, files)
    assert any(f": it mounts over {over}" in p for p in problems), problems
