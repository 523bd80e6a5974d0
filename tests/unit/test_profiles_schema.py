"""seatkit/seat/profiles.py: every string a profile can hold, found by walking the pydantic schema, fed
hostile values.

A hostile value either fails validation naming its field, or the rendered script and compose file
run exactly the LaunchSpec's argv (captured by a stub `docker` and a stub server on PATH), with
SEAT_DRY_RUN=1 and without, and the canary file never appears.
"""

from __future__ import annotations

import copy
import subprocess
import types
import typing
from pathlib import Path

import pytest
import yaml
from conftest import unguarded
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from seatkit.seat import profiles
from seatkit.serve import effective, k8s, render
from seatkit.serve import spec as specs

CANARY = "canary"
PIECES = [
    "$(touch canary)",
    "`touch canary`",
    "'; touch canary; '",
    '"; touch canary; "',
    "\ntouch canary\n",
    "-v /:/host",
    "--privileged",
    "*",
    "?",
    "[a]",
    " a b ",
    "${IFS}",
    "\\",
    "é☃",
    "\r",
    ":",
    ",",
    "~",
    "#",
    "&&",
    "|",
    ">x",
    "..",
    "/",
    "-",
    "$$",
    "%q",
]
# No NUL: an argv cannot carry one, and nobody types one into a profile by accident (the threat model)
TYPED = st.text(st.characters(blacklist_characters="\x00"), min_size=1, max_size=3)
HOSTILE = st.lists(st.sampled_from(PIECES) | TYPED, min_size=1, max_size=4).map("".join)
INTERNAL = {"source", "sha256"}  # set by the loader from the file, never read from it


def _str_like(tp) -> bool:
    if typing.get_origin(tp) is typing.Annotated:
        return _str_like(typing.get_args(tp)[0])
    if tp in (str, typing.Any):
        return True
    if typing.get_origin(tp) is typing.Literal:  # a choice of words is a string field too
        return any(isinstance(a, str) for a in typing.get_args(tp))
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(_str_like(a) for a in typing.get_args(tp))
    return False


def slots(tp, path: tuple = ()) -> list[tuple]:
    """Paths to every place a string can sit: field names, '*' for an element or value, '{key}'
    for a mapping's key."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return slots(args[0], path)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [
            s
            for name, f in tp.model_fields.items()
            if name not in INTERNAL
            for s in slots(f.annotation, (*path, name))
        ]
    if origin in (typing.Union, types.UnionType):
        found = [path] if _str_like(tp) else []
        return found + [s for a in args if not _str_like(a) for s in slots(a, path) if s != path]
    if origin is list:
        return slots(args[0], (*path, "*"))
    if origin is dict:
        return ([(*path, "{key}")] if _str_like(args[0]) else []) + slots(args[1], (*path, "*"))
    return [path] if _str_like(tp) else []


SLOTS = sorted(set(slots(profiles.Profile)))


def base_data(runtime: str) -> dict:
    name = profiles.DEFAULT_PROFILE if runtime == "docker" else profiles.EMBEDDED_DEFAULT
    data = profiles._raw(profiles.profile_path(name))[0]
    return {**data, "name": "hostile"}


def plant(data: dict, path: tuple, value: str) -> bool:
    """Put value at path in data; False where this profile has no such place."""
    node = data
    for i, step in enumerate(path):
        last = i == len(path) - 1
        if step == "{key}":
            if not isinstance(node, dict) or not node:
                return False
            node[value] = copy.deepcopy(next(iter(node.values())))
            return True
        if step == "*":
            if isinstance(node, list):
                if last:
                    node.insert(0, value)
                    return True
                if not node:
                    return False
                node = node[0]
                continue
            if not isinstance(node, dict):
                return False
            key = next(iter(node), "HOSTILE_KEY" if last else None)
            if key is None:
                return False
            if last:
                node[key] = value
                return True
            node = node[key]
            continue
        if not isinstance(node, dict):
            return False
        if last:
            node[step] = value
            return True
        if not isinstance(node.get(step), (dict, list)):
            return False
        node = node[step]
    return False


def _names(path: tuple, loc: tuple) -> bool:
    """Does a validation error's location name the planted field (or the section holding it)?"""
    loc = [p for p in loc if p != "[key]"]
    matched = [step in ("*", "{key}") or step == part for step, part in zip(path, loc, strict=False)]
    return bool(matched) and all(matched)


STUB_DOCKER = """#!/bin/bash
case "$1" in
  run) printf '%s\\0' docker "$@" > "$SEAT_TEST_ARGV_OUT" ;;
  container) exit 1 ;;
esac
"""
STUB_SERVER = """#!/bin/bash
printf '%s\\0' "$0" "$@" > "$SEAT_TEST_ARGV_OUT"
"""


def docker_argv(spec, values) -> list[str]:
    """The docker command the script must run: the spec's parts, each one argument."""
    d = spec.profile.docker
    argv = [
        "docker",
        "run",
        "--rm",
        "--name",
        values["SEAT_CONTAINER"],
        "--gpus",
        "all" if d.gpus == "all" else "device=" + ",".join(map(str, d.gpus)),
        "--ipc",
        d.ipc,
        "--network",
        d.network,
        *(["--init"] if d.init else []),
        "--stop-timeout",
        str(d.stop_grace_s),
        "--label",
        f"{specs.PROFILE_LABEL}={spec.profile.name}",
    ]
    argv += [a for k, v in d.ulimits.items() for a in ("--ulimit", f"{k}={v}")]
    argv += [
        a
        for m in spec.mounts
        for a in (
            "--volume",
            f"{specs.resolve(m.source, values)}:{m.target}" + (":ro" if m.read_only else ""),
        )
    ]
    argv += [a for k, v in spec.env.items() for a in ("--env", f"{k}={v}")]
    argv += [
        a for k, v in {n: values[n] for n in specs.CONTAINER_KNOBS}.items() for a in ("--env", f"{k}={v}")
    ]
    argv += [a for n in spec.pass_env for a in ("--env", n)]
    argv += ["--env", "VLLM_API_KEY"] if spec.api_key_file else []
    return argv + [values["SEAT_IMAGE"], *effective.argv(spec, values)]


def run_rendered(spec, tmp: Path) -> None:
    """Run the script three ways and check the argv each time; the canary must never appear."""
    bin_dir, home = tmp / "bin", tmp / "home"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "docker").write_text(STUB_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    # A non-loopback host without a key is refused at launch (tested apart); here the argv is checked.
    environ = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp),
        "SEAT_HOME": str(home),
        "SEAT_TEST_ARGV_OUT": str(tmp / "argv"),  # SEAT_*: kept by a native script
        "SEAT_EXPOSE_WITHOUT_KEY": "1",
    }
    values = spec.values(environ)
    if spec.native:
        server = Path(specs.resolve(spec.command[0], values))
        server.parent.mkdir(parents=True, exist_ok=True)
        server.write_text(STUB_SERVER)
        server.chmod(0o755)
        want = [specs.resolve(w, values) for w in spec.command]
    else:
        want = docker_argv(spec, values)
    script = tmp / "serve.sh"
    script.write_text(render.render_script(spec))

    def bash(**extra):
        (tmp / "argv").unlink(missing_ok=True)
        return subprocess.run(
            ["bash", str(script)],
            cwd=tmp,
            env={**environ, **extra},
            capture_output=True,
            text=True,
            timeout=60,
        )

    bash()  # preflight on: it may refuse, but must never run a value
    assert not (tmp / CANARY).exists()
    done = bash(SEAT_SKIP_PREFLIGHT="1")
    assert done.returncode == 0, done.stderr
    assert (tmp / "argv").read_bytes().split(b"\0")[:-1] == [a.encode() for a in want]
    dry = bash(SEAT_DRY_RUN="1")
    assert dry.returncode == 0, dry.stderr
    assert not (tmp / "argv").exists()  # a dry run runs nothing
    words = subprocess.run(
        ["bash", "-c", 'eval "a=($1)"; printf "%s\\0" "${a[@]}"', "_", dry.stdout],
        cwd=tmp,
        capture_output=True,
        env=environ,
        check=True,
    ).stdout
    assert words.split(b"\0")[:-1] == [a.encode() for a in want]
    assert not (tmp / CANARY).exists()


def unescape(text: str) -> str:
    """A literal $ as compose and the kubelet write it ($$), back to one."""
    return text.replace("$$", "$")


def check_compose(spec) -> None:
    seat = yaml.safe_load(render.render_compose(spec))["services"]["seat"]
    values = {k.name: "${" + k.name + "}" for k in spec.knobs}
    assert [unescape(c) for c in unguarded(seat["command"])] == [
        "env",
        *[a for n in spec.unset_env for a in ("-u", n)],
        *[specs.resolve(w, values) for w in spec.command],
    ]
    assert {k: v and unescape(v) for k, v in seat["environment"].items()} == {
        **spec.env,
        **{n: values[n] for n in specs.CONTAINER_KNOBS},
        **dict.fromkeys(spec.pass_env),
    }
    assert [unescape(v["target"]) for v in seat["volumes"]] == [m.target for m in spec.mounts]


def check_k8s(spec) -> None:
    """The manifest runs the container argv and environment the other forms run, bound to the pod."""
    objects = [doc for text in k8s.render(spec).values() for doc in yaml.safe_load_all(text)]
    workload = next(o for o in objects if o["kind"] == "StatefulSet")
    container = workload["spec"]["template"]["spec"]["containers"][0]
    values = {**spec.values({}), "SEAT_HOST": k8s.POD_HOST}
    assert [unescape(a) for a in container["args"]] == effective.argv(spec, values)
    assert {e["name"]: unescape(e["value"]) for e in container["env"] if "value" in e} == {
        **spec.env,
        **{n: values[n] for n in specs.CONTAINER_KNOBS},
    }


def test_the_walk_finds_every_string_field():
    # Spot checks that the walk reaches nested lists, mapping keys and Any values.
    for slot in [
        ("models", "*", "files", "*"),
        ("docker", "ulimits", "{key}"),
        ("name",),
        ("env", "*"),
        ("env", "{key}"),
        ("speculative", "config", "*"),
        ("native", "packages", "*"),
        ("vllm_args", "*"),
        ("image", "tag"),
    ]:
        assert slot in SLOTS, slot
    assert len(SLOTS) > 40


@pytest.mark.parametrize("runtime", ["docker", "native"])
@pytest.mark.parametrize("slot", SLOTS, ids=lambda s: ".".join(s))
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(value="x\"; touch canary; \"'$(touch canary)`touch canary`'; touch canary\n-v /:/host *")
@example(value="--privileged")
@given(value=HOSTILE)
def test_a_hostile_value_is_refused_or_stays_one_argument(tmp_path_factory, runtime, slot, value):
    data = base_data(runtime)
    if not plant(data, slot, value):
        return  # this runtime's profile has no such place; the other one covers it
    try:
        seat = profiles.parse(data)
    except ValidationError as exc:
        # Named by its place, or (a check across fields) by its field name in the message.
        assert any(
            _names(slot, tuple(e["loc"])) or (not e["loc"] and slot[0] in e["msg"]) for e in exc.errors()
        ), (slot, exc)
        return
    spec = specs.build(seat)
    run_rendered(spec, tmp_path_factory.mktemp("hostile"))
    if not spec.native:
        check_compose(spec)
    if spec.profile.kubernetes:
        try:
            check_k8s(spec)
        except profiles.SeatError as exc:  # refused, with the fix: a name Kubernetes refuses (a
            # digit first), or a host profile named that is not there
            assert (slot == ("name",) and exc.hint == "set kubernetes.name (a letter first)") or (
                slot == ("kubernetes", "host_profile") and exc.message.startswith("no host profile at")
            ), (slot, exc)


@pytest.mark.parametrize("name", ["a\nrm -rf x", "$(touch canary)", "-x", "A", "a b", ".a"])
def test_a_hostile_profile_file_name_is_refused(tmp_path, name):
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"extends: {profiles.EMBEDDED_DEFAULT}\n")
    with pytest.raises(profiles.SeatError, match="not a profile name"):
        profiles.load(str(path))


@pytest.mark.parametrize(
    "runtime, path, value, field",
    [
        ("docker", ("models", "base", "files"), ['a"$(touch canary)".json'], "models.base.files.0"),
        ("docker", ("docker", "ulimits"), {"nofile --privileged -v /:/host": 1}, "docker.ulimits"),
        ("docker", ("docker", "ulimits"), {"nofile": "1; touch canary"}, "docker.ulimits.nofile"),
        ("docker", ("models", "base", "files"), ["../../etc/shadow"], "models.base.files.0"),
        ("docker", ("image", "vllm_dir"), "/opt/x y", "image.vllm_dir"),
        ("docker", ("image", "tag"), "1 --privileged", "image.tag"),
        ("docker", ("server", "served_model_name"), "--api-key=x", "server.served_model_name"),
        ("docker", ("description",), "ok\ntouch canary", "description"),
        ("native", ("native", "packages"), ["--index-url=http://x/simple", "vllm"], "native.packages.0"),
        ("native", ("native", "python"), "-c", "native.python"),
        ("native", ("native", "metadata_shim"), "1/../../../x", "native.metadata_shim"),
    ],
)
def test_the_issue_s_examples_are_refused_naming_the_field(runtime, path, value, field):
    data = base_data(runtime)
    node = data
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    with pytest.raises(ValidationError) as caught:
        profiles.parse(data)
    named = {".".join(str(p) for p in e["loc"] if p != "[key]") for e in caught.value.errors()}
    assert any(n.startswith(field) for n in named), named
