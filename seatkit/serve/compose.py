"""The docker seat's long-running form: docker-compose.yml and the .env of its host knobs, rendered
from the container's effective launch (serve/effective.py), as the script's `docker run` is.
"""

from __future__ import annotations

import yaml

from seatkit.seat import profiles
from seatkit.serve import effective, keys
from seatkit.serve import spec as specs
from seatkit.serve.spec import LaunchSpec
from seatkit.serve.words import Ref, Word


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


def _compose_command(launch: effective.Launch, wrap: list[Word]) -> list[str]:
    """What the service runs: a keyless seat's argv behind the exposure check (however it is
    started: `up --no-deps`, `run`, a restart), which execs the argv when the bind is allowed."""
    argv = [_compose_word(w) for w in launch.argv(wrap)]
    return [*_exposure_words(), *argv] if launch.guarded else argv


_KEY_FROM_SHELL = (
    f"${{{effective.API_KEY_ENV}:?export {effective.API_KEY_ENV} from the seat's key file "
    "(see .env; seat up makes it)}"
)


def _compose_value(variable: effective.Variable) -> str | None:
    """A variable as compose writes it: a knob as ${NAME}, a pass-through null (from the shell,
    only when set), the key required from the shell."""
    if variable.source is effective.Source.LAUNCHER:
        return None
    if variable.source is effective.Source.KEY:
        return _KEY_FROM_SHELL
    return _compose_word(variable.value)


# Compose has no test of a value: a keyless seat's own command checks its bind address before it
# execs the server, and a one-shot service the seat depends on runs the same check first, so a
# plain `docker compose up` with a non-loopback SEAT_HOST fails before the seat is started (and
# restarted by its policy). The address and the override come in as arguments; $$ is compose's $.
EXPOSURE_CHECK = "exposure-check"
_EXPOSURE_SCRIPT = (
    '[ "$$(printf \'%s\' "$$1" | grep -Ex \'{loopback}\')" = "$$1" ] || [ "$$2" = 1 ] || '
    '{{ printf \'seat: {refusal}\\n  hint: {hint}\\n\' "$$1" >&2; exit 1; }}; shift 2; exec "$$@"'
)


def _exposure_words() -> list[str]:
    """sh running the check, then what follows the address and the override (nothing: exit 0)."""
    script = _EXPOSURE_SCRIPT.format(
        loopback=keys.LOOPBACK.pattern,
        refusal=keys.REFUSAL.format(host="%s"),
        hint=keys.REFUSAL_HINT,
    )
    return ["sh", "-c", script, EXPOSURE_CHECK, "${SEAT_HOST}", f"${{{keys.EXPOSE_WITHOUT_KEY}:-0}}"]


def _exposure_check() -> dict[str, object]:
    words = _exposure_words()
    return {
        "image": "${SEAT_IMAGE}",
        "entrypoint": words[:4],
        "command": words[4:],
        "network_mode": "none",
        "restart": "no",
    }


def _compose_service(
    spec: LaunchSpec, docker: profiles.Docker, launch: effective.Launch
) -> dict[str, object]:
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
        "command": _compose_command(launch, []),
        "network_mode": docker.network,
        "ipc": docker.ipc,
        "init": docker.init,
        "labels": {specs.PROFILE_LABEL: p.name},
        "restart": docker.restart,
        "stop_grace_period": f"{docker.stop_grace_s}s",
        "ulimits": dict(docker.ulimits),
        "environment": {v.name: _compose_value(v) for v in launch.env},
        "volumes": [
            {
                "type": "bind",
                "source": _compose_word(
                    m.source, {k.name: k.shell_default for k in spec.knobs if k.shell_default}
                ),
                "target": _compose_escape(m.target),
                "read_only": m.read_only,
            }
            for m in launch.mounts
        ],
        **({"deploy": {"resources": {"reservations": {"devices": [gpus]}}}} if docker.gpus else {}),
        **(
            {"depends_on": {EXPOSURE_CHECK: {"condition": "service_completed_successfully"}}}
            if launch.guarded
            else {}
        ),
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
    launch = effective.container(spec)
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
        + (
            f"# No API key: {EXPOSURE_CHECK} runs first and refuses a SEAT_HOST other than loopback\n"
            f"# (the seat does not start) unless {keys.EXPOSE_WITHOUT_KEY}=1 is set; the seat's own\n"
            "# command checks the same before the server starts, however it is started.\n"
            if launch.guarded
            else ""
        )
    )
    assert isinstance(p, profiles.DockerProfile)  # a native seat has no compose file (profile_files)
    services = {"seat": _compose_service(spec, p.docker, launch)}
    for mode, words in spec.wraps.items():  # compose cannot add words on a knob: one service a mode
        services[f"seat-nsys-{mode}"] = {
            "extends": {"service": "seat"},  # its depends_on too
            "profiles": [f"nsys-{mode}"],
            "command": _compose_command(launch, words),
        }
    if launch.guarded:
        services[EXPOSURE_CHECK] = _exposure_check()
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
