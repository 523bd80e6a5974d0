"""`seat render`: profiles to launch scripts, docker-compose.yml, .env and LAUNCH_CONFIG.md.

Everything rendered is committed; `check` re-renders in memory and reports every file that differs.
"""

from __future__ import annotations

import difflib
import shlex
from pathlib import Path

import jinja2
import yaml

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.seat import overlay_lock, profiles, what_runs
from seatkit.serve import glossary, k8s, nsys
from seatkit.serve import spec as specs
from seatkit.serve.shell import always_quoted, argv_lines, double_quoted, oneline, quoted_word, shell_word
from seatkit.serve.spec import LaunchSpec
from seatkit.serve.words import Ref, Word


def _unknown_check(kind: str) -> str:
    raise SeatError(
        f"the launch template has no check of kind {kind!r}", "this is a bug in seatkit: report it"
    )


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("seatkit.serve", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(
        sh=shlex.quote,
        sq=always_quoted,
        word=shell_word,
        qword=quoted_word,
        argv_lines=argv_lines,
        dq=double_quoted,
        oneline=oneline,
    )
    env.globals.update(
        unknown_check=_unknown_check,
        local_images=overlay_lock.REPOSITORY,
        profile_label=specs.PROFILE_LABEL,
        shell_kept=what_runs.shell_patterns()[0],
        what_runs=what_runs.shell_patterns()[1],
        shell_unset=what_runs.shell_unset(),
    )
    return env


def render_script(spec: LaunchSpec) -> str:
    return (
        _environment()
        .get_template("serve.sh.j2")
        .render(p=spec.profile, spec=spec, container_knobs=specs.CONTAINER_KNOBS, nsys_no_modes=nsys.NO_MODES)
    )


def _compose_escape(text: str) -> str:
    return text.replace("$", "$$")


def _compose_word(word: Word, defaults: dict[str, str] | None = None) -> str:
    """The word in compose's interpolation; a knob in defaults falls back to its shell default
    (compose reads nested ${A:-${B:-c}} and $HOME as bash does), since .env cannot pin it."""
    return "".join(
        (f"${{{p.name}:-{(defaults or {})[p.name]}}}" if p.name in (defaults or {}) else f"${{{p.name}}}")
        if isinstance(p, Ref)
        else _compose_escape(p)
        for p in word
    )


def _compose_command(spec: LaunchSpec, wrap: list[Word]) -> list[str]:
    return [
        "env",
        *[a for n in spec.unset_env for a in ("-u", n)],
        *[_compose_word(w) for w in [*wrap, *spec.command]],
    ]


def _compose_environment(spec: LaunchSpec) -> dict[str, str | None]:
    environment: dict[str, str | None] = {
        **{k: _compose_escape(v) for k, v in spec.env.items()},
        **{k: f"${{{k}}}" for k in specs.CONTAINER_KNOBS},
    }
    environment.update(dict.fromkeys(spec.pass_env))  # null: from the shell, only when set
    if spec.api_key_file:
        environment["VLLM_API_KEY"] = (
            "${VLLM_API_KEY:?export VLLM_API_KEY from the seat's key file (see .env; seat up makes it)}"
        )
    return environment


def _compose_service(spec: LaunchSpec, docker: profiles.Docker) -> dict[str, object]:
    """The seat's service: the script's docker run, field by field."""
    p = spec.profile
    gpus: dict[str, object] = {"driver": "nvidia", "capabilities": ["gpu"]}
    if docker.gpus == "all":
        gpus["count"] = "all"
    else:
        gpus["device_ids"] = [str(i) for i in docker.gpus]
    return {
        "image": "${SEAT_IMAGE}",
        "container_name": "${SEAT_CONTAINER}",
        "command": _compose_command(spec, []),
        "network_mode": docker.network,
        "ipc": docker.ipc,
        "init": docker.init,
        "labels": {specs.PROFILE_LABEL: p.name},
        "restart": docker.restart,
        "stop_grace_period": f"{docker.stop_grace_s}s",
        "ulimits": dict(docker.ulimits),
        "environment": _compose_environment(spec),
        "volumes": [
            {
                "type": "bind",
                "source": _compose_word(
                    m.source, {k.name: k.shell_default for k in spec.knobs if k.shell_default}
                ),
                "target": _compose_escape(m.target),
                "read_only": m.read_only,
            }
            for m in spec.mounts
        ],
        **({"deploy": {"resources": {"reservations": {"devices": [gpus]}}}} if docker.gpus else {}),
        "healthcheck": {
            "test": ["CMD", "curl", "-fsS", "http://${SEAT_HOST}:${SEAT_PORT}/health"],
            "interval": "30s",
            "timeout": "5s",
            "retries": 3,
            "start_period": f"{int(p.server.health_timeout_s)}s",
        },
    }


def render_compose(spec: LaunchSpec) -> str:
    """The long-running form of the docker seat; knobs come from .env beside it."""
    p = spec.profile
    header = (
        f"# {p.name}: rendered by `seat render` from profiles/{p.name}.yaml "
        f"(profile sha256 {p.sha256[:16]}).\n"
        "# Do not edit: change the profile and run `seat render`. Host knobs live in .env.\n"
        "# ipc: host means the host's /dev/shm is used; shm_size would be inert, so none is set.\n"
        + (
            "# Nsight Systems: `docker compose up -d seat-nsys-session` (or seat-nsys-profile) runs the\n"
            "# same seat under nsys; SEAT_NSYS_* in .env set it up. Stop it by name, `docker compose\n"
            "# down seat-nsys-session`: a plain `docker compose down` leaves it running.\n"
            if spec.wraps
            else ""
        )
    )
    assert isinstance(p, profiles.DockerProfile)  # a native seat has no compose file (profile_files)
    services = {"seat": _compose_service(spec, p.docker)}
    for mode, words in spec.wraps.items():  # compose cannot add words on a knob: one service a mode
        services[f"seat-nsys-{mode}"] = {
            "extends": {"service": "seat"},
            "profiles": [f"nsys-{mode}"],
            "command": _compose_command(spec, words),
        }
    body = yaml.safe_dump(
        {"name": p.name, "services": services}, sort_keys=False, width=100, allow_unicode=True
    )
    return header + body


def _env_value(value: str) -> str:
    """A .env value compose reads back unchanged: single quotes are literal, unless they can't be."""
    if "'" not in value and "\n" not in value:
        return f"'{value}'"
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("$", "\\$")
    return f'"{escaped}"'


def render_env(spec: LaunchSpec) -> str:
    lines = [
        f"# Host knobs for docker-compose.yml ({spec.profile.name}); rendered by `seat render`.",
        "# Override a value from the shell environment, which compose prefers to this file;",
        "# `seat render` rewrites this file from the profile.",
    ]
    for knob in spec.knobs:
        if knob.shell_default:  # its default depends on who runs it: named, never pinned here
            lines += [f"# {knob.meaning}: by default {knob.shell_default}"]
        else:
            lines += [f"# {knob.meaning}", f"{knob.name}={_env_value(knob.default)}"]
    return "\n".join(lines) + "\n"


def render_launch_config(spec: LaunchSpec) -> str:
    return (
        _environment()
        .get_template("LAUNCH_CONFIG.md.j2")
        .render(
            p=spec.profile,
            spec=spec,
            flags=glossary.explain_flags(spec),
            env=glossary.explain_env(spec),
            values=spec.values({}),
            resolve=specs.resolve,
            script=render_script(spec),
        )
    )


def profile_files(name: str, root: Path | None = None) -> dict[Path, str]:
    """What one profile renders: its script, a compose file with its .env for a docker profile
    other than the default (whose compose set is at the top), and k8s/NAME/ for a profile with a
    kubernetes section."""
    root = root or paths.REPO  # looked up when called, not bound when this module was imported
    spec = specs.build(profiles.load(name))
    out = {root / "serve" / f"{name}.sh": render_script(spec)}
    if name != profiles.DEFAULT_PROFILE and not spec.native:
        out[compose_path(name, root)] = render_compose(spec)
        out[compose_path(name, root).with_name(".env")] = render_env(spec)
    if spec.profile.kubernetes:
        for file, text in k8s.render(spec).items():
            out[root / "k8s" / name / file] = text
    return out


def rendered(
    root: Path = paths.REPO, extra: dict[Path, str] | None = None, bad: dict[str, SeatError] | None = None
) -> dict[Path, str]:
    """Every rendered file and its content: each profile's files, the default's compose set, and
    extra (files rendered by layers above this one: docs/commands.md's table, the Dockerfile's defaults).

    A profile that does not load raises, naming its file; with `bad`, it is recorded there instead
    and the others are still rendered."""
    out: dict[Path, str] = dict(extra or {})
    for name in profiles.profile_names():
        try:
            out.update(profile_files(name, root))
        except SeatError as exc:
            if bad is None:
                raise
            bad[name] = exc
    if profiles.DEFAULT_PROFILE in (bad or {}):
        return out
    default = specs.build(profiles.load(profiles.DEFAULT_PROFILE))
    out[root / "docker-compose.yml"] = render_compose(default)
    out[root / ".env"] = render_env(default)
    out[root / "LAUNCH_CONFIG.md"] = render_launch_config(default)
    return out


def compose_path(name: str, root: Path | None = None) -> Path:
    """The compose file of a docker profile: the default's at the top, the others' in compose/NAME/."""
    root = root or paths.REPO
    if name == profiles.DEFAULT_PROFILE:
        return root / "docker-compose.yml"
    return root / "compose" / name / "docker-compose.yml"


def _stale(root: Path, files: dict[Path, str], keep: frozenset[str] = frozenset()) -> list[Path]:
    """Rendered files no profile renders now (a removed profile), except those of profiles in keep.
    Only the names render writes: a kustomization or Secret beside the manifests is the user's."""
    found = [
        *(root / "serve").glob("*.sh"),
        *(root / "compose").glob("*/docker-compose.yml"),
        *(root / "compose").glob("*/.env"),
        *(path for file in k8s.FILES for path in (root / "k8s").glob(f"*/{file}")),
    ]
    owner = lambda path: path.stem if path.parent.name == "serve" else path.parent.name  # noqa: E731
    return sorted(path for path in found if path not in files and owner(path) not in keep)


def write(root: Path | None = None, extra: dict[Path, str] | None = None) -> list[Path]:
    """Write what changed; returns the paths written. Files of removed profiles go.

    A bad profile does not stop the others: they are written, its old files are kept, and then
    a SeatError names every bad profile file."""
    root = root or paths.REPO
    bad: dict[str, SeatError] = {}
    files = rendered(root, extra, bad)
    written = []
    for path, text in files.items():
        if not path.exists() or path.read_text() != text:
            write_atomic(path, text, 0o755 if path.suffix == ".sh" else 0o644)
            written.append(path)
    for stale in _stale(root, files, frozenset(bad)):
        stale.unlink()
        written.append(stale)
        if stale.parent.name != "serve" and not any(stale.parent.iterdir()):
            stale.parent.rmdir()
    if bad:
        raise SeatError(
            f"rendered the other profiles ({len(written)} files written), but not "
            f"{', '.join(sorted(bad))}:\n" + "\n".join(e.message for e in bad.values()),
            "fix the profiles named above and run `seat render` again",
        )
    return written


def drift(root: Path | None = None, extra: dict[Path, str] | None = None) -> dict[Path, str]:
    """Each committed file that differs from a fresh render, with its unified diff."""
    root = root or paths.REPO
    files = rendered(root, extra)
    out = {}
    for path, text in files.items():
        current = path.read_text() if path.exists() else ""
        if current != text:
            out[path] = "".join(
                difflib.unified_diff(
                    current.splitlines(True),
                    text.splitlines(True),
                    f"{path.name} (committed)",
                    f"{path.name} (fresh render)",
                )
            )
    for stale in _stale(root, files):
        out[stale] = f"{stale.relative_to(root)}: no profile renders this file any more\n"
    return out


def require_no_drift(root: Path | None = None, extra: dict[Path, str] | None = None) -> None:
    root = root or paths.REPO
    found = drift(root, extra)
    if found:
        raise SeatError(
            "rendered files differ from a fresh render:\n" + "".join(found.values()),
            "run `seat render` and commit the result; never edit rendered files",
        )
