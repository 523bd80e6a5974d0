"""The container's effective launch: one description that the script, compose and k8s each render.

Its argv, its environment (each variable and where its value comes from) and its mounts, and the
rule for exposure, decided here once: a seat that binds anything but loopback takes the API key,
unless the operator sets SEAT_EXPOSE_WITHOUT_KEY=1 where it is launched. Where the bind address is
a knob (the script, compose, `seat up`), the form refuses a non-loopback one at launch; a pod binds
every address of its own network namespace, which its Services reach, so its launch always takes
the key (a cluster has no launching shell to say otherwise).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from enum import Enum

from seatkit.serve import keys, nsys
from seatkit.serve.spec import CONTAINER_KNOBS, LaunchSpec, Mount, resolve
from seatkit.serve.words import Ref, Word

API_KEY_ENV = "VLLM_API_KEY"


class Source(Enum):
    """Where a variable of the container's environment takes its value."""

    PROFILE = "profile"  # a literal of the profile (env, docker.extra_env)
    KNOB = "knob"  # a host knob: the form's own value for it
    LAUNCHER = "launcher"  # passed through from where the seat is launched, only when set there
    KEY = "key"  # the API key: the key file, or the cluster's Secret


@dataclass(frozen=True)
class Variable:
    name: str
    source: Source
    value: Word = ()  # PROFILE and KNOB only


@dataclass(frozen=True)
class Launch:
    unset: list[str]  # the image's variables `env -u` takes away before the server starts
    command: list[Word]  # the server's argv
    env: list[Variable]
    mounts: list[Mount]
    guarded: bool  # the bind address is a knob: the form refuses a non-loopback one without a key

    def argv(self, wrap: list[Word] | None = None) -> list[Word]:
        """What the container runs: `env -u NAME...`, the wrap (nsys) when given, the server."""
        return [("env",), *[(a,) for n in self.unset for a in ("-u", n)], *(wrap or []), *self.command]

    def environment(self, values: dict[str, str], passed: dict[str, str], key: str = "") -> dict[str, str]:
        """The container's environment: the profile's and the knobs' values, what the launching
        shell passes on (passed: the pass-through names it sets), the key."""
        out = {}
        for v in self.env:
            if v.source is Source.LAUNCHER and v.name in passed:
                out[v.name] = passed[v.name]
            elif v.source is Source.KEY:
                out[v.name] = key
            elif v.source is not Source.LAUNCHER:
                out[v.name] = resolve(v.value, values)
        return out

    def sha256(self) -> str:
        """The launch as each form renders it (a knob as the name whose value it takes)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, default=str).encode()).hexdigest()


def argv(spec: LaunchSpec, values: dict[str, str]) -> list[str]:
    """What the container runs, with the knobs' values: the nsys wrap when on."""
    wrap = spec.wraps.get(values.get(nsys.MODE, nsys.OFF), [])
    return [resolve(w, values) for w in container(spec).argv(wrap)]


def container(spec: LaunchSpec, bound: str | None = None) -> Launch:
    """The launch of the spec's container. bound: the address a form binds whatever the knob says
    (a pod's); None: the SEAT_HOST knob, checked where the seat is launched."""
    keyed = bool(spec.api_key_file) or (bound is not None and not keys.LOOPBACK.fullmatch(bound))
    env = [Variable(name, Source.PROFILE, (value,)) for name, value in spec.env.items()]
    env += [Variable(name, Source.KNOB, (Ref(name),)) for name in CONTAINER_KNOBS]
    env += [Variable(name, Source.LAUNCHER) for name in spec.pass_env]
    if keyed:
        env.append(Variable(API_KEY_ENV, Source.KEY))
    return Launch(
        unset=list(spec.unset_env),
        command=list(spec.command),
        env=env,
        mounts=list(spec.mounts),
        guarded=not keyed and bound is None,
    )
