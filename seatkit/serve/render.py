"""`seat render`: profiles to launch scripts, docker-compose.yml, .env and LAUNCH_CONFIG.md.

Everything rendered is committed; `check` re-renders in memory and reports every file that differs.
"""

from __future__ import annotations

import difflib
import shlex
from pathlib import Path

import jinja2

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.seat import overlay_lock, profiles, what_runs
from seatkit.serve import effective, glossary, k8s, keys, nsys, provenance
from seatkit.serve import spec as specs
from seatkit.serve.compose import render_compose, render_env
from seatkit.serve.shell import always_quoted, argv_lines, double_quoted, oneline, quoted_word, shell_word
from seatkit.serve.spec import LaunchSpec


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
        env_arg=_env_arg,
    )
    env.globals.update(
        unknown_check=_unknown_check,
        local_images=overlay_lock.REPOSITORY,
        profile_label=specs.PROFILE_LABEL,
        shell_kept=what_runs.shell_kept(),
        shell_unset=what_runs.shell_unset(),
    )
    return env


def _env_arg(variable: effective.Variable) -> str:
    """docker run's --env word: NAME=value, NAME=${KNOB} for the shell to expand, or NAME alone
    (docker passes it on when it is set)."""
    if variable.source is effective.Source.KNOB:  # a knob's value is its reference alone
        return double_quoted(f"{variable.name}=" + "".join(f"${{{p.name}}}" for p in variable.value))
    if variable.source is effective.Source.PROFILE:
        return always_quoted(f"{variable.name}={specs.resolve(variable.value, {})}")
    return variable.name


def _render(template: str, spec: LaunchSpec, **more) -> str:
    return _environment().get_template(template).render(p=spec.profile, spec=spec, **more)


def render_script(spec: LaunchSpec) -> str:
    return _render(
        "serve.sh.j2",
        spec,
        launch=effective.container(spec),
        loopback=keys.LOOPBACK.pattern,
        refusal=keys.REFUSAL.format(host="$SEAT_HOST"),  # the one wording, keys.refuse_exposure's
        refusal_hint=keys.REFUSAL_HINT,
        nsys_no_modes=nsys.NO_MODES,
    )


def render_preflight(spec: LaunchSpec) -> str:
    """The script's knob grammar and preflight alone: what `seat up` runs before it starts the seat."""
    return _render("preflight-alone.sh.j2", spec)


def render_launch_config(spec: LaunchSpec) -> str:
    return _render(
        "LAUNCH_CONFIG.md.j2",
        spec,
        flags=glossary.explain_flags(spec),
        env=glossary.explain_env(spec),
        values=spec.values({}),
        resolve=specs.resolve,
        script=render_script(spec),
    )


def profile_files(name: str, root: Path | None = None) -> dict[Path, str]:
    """What one profile renders: its script, a compose file with its .env for a docker profile
    other than the default (whose compose set is at the top), and k8s/NAME/ for a profile with a
    kubernetes section."""
    root = root or paths.REPO  # looked up when called, not bound when this module was imported
    spec = specs.build(profiles.load(name))
    out = {provenance.script_path(name, root): render_script(spec)}
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
