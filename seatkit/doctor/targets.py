"""What the bench measures: a running seat of a profile, or any OpenAI-compatible URL, with the
host's and the image's facts about it (which is why it sits above bench, host and image)."""

from __future__ import annotations

import base64

from seatkit import engine, text
from seatkit.bench.target import Target, with_differences
from seatkit.errors import SeatError
from seatkit.host import gpus
from seatkit.image import b12x
from seatkit.models import verify
from seatkit.seat import layout, profiles, what_runs
from seatkit.serve import bound, identity, launch, reach
from seatkit.serve.backends import docker


def of_profile(name: str) -> Target:
    """The seat `seat up` started for the profile, with the profile's conditions (refused when the
    profile was edited since: they would not be the seat's) and the mark its record holds, or
    why it no longer runs what its record verified (_since_up)."""
    profile = profiles.load(name)
    running = bound.seat_of(profile)
    if running is None:
        raise SeatError(f"{profile.name} is not up", f"seat up {profile.name}, or pass --url and --model")
    spec = profile.speculative
    found = _container(running, profile)
    labels, mounts = (found.image.labels, found.attrs.get("Mounts") or []) if found else (None, [])
    draft = profile.models[spec.draft_model] if spec and spec.draft_model else None
    launched = running.provenance or {}  # as recorded at `seat up`, never as the files read now
    return Target(
        running.url,
        running.model,
        launch.headers(running),
        k=spec.num_speculative_tokens if spec else None,
        conditions={
            "profile": profile.name,
            "profile_sha256": launched.get("profile_sha256"),
            "draft_method": spec.method if spec else None,
            "draft_policy": (spec.config.get("draft_sample_method", "greedy") if spec else None),
            "base_model": _model_name(profile.models[profile.model]),
            "draft_model": _model_name(draft) if draft else None,
            "model_locks": launched.get("model_locks"),
            "image": profile.image.reference if profile.image else None,
            "image_labels": labels,
            "b12x_kernels": b12x.kernels(labels, b12x.mounted_over(mounts, profile.image.b12x_dir))
            if profile.image
            else None,
            "runtime": profile.runtime,
            "gpus": gpus.inventory(),
            **_marks(running, profile, found),
        },
        verify=lambda: _unproven(running),
    )


def _model_name(model) -> str:
    return model.host_dir or f"{model.build} (built locally)"


def _container(running: launch.Running, profile: profiles.Profile):
    """The seat's container (its image's labels, its mounts, when it started), None for a process."""
    if not launch.in_container(running) or profile.image is None:
        return None
    return engine.client().containers.get(running.ident)


def _marks(running: launch.Running, profile: profiles.Profile, found) -> dict:
    """The mark of the seat's record; of a seat `seat up` recorded as verified, why it may serve
    other than it verified, looked at as the bench starts (_since_up)."""
    marks = running.conditions()
    return marks if what_runs.mark(marks) else with_differences(marks, _since_up(running, profile, found))


def _since_up(running: launch.Running, profile: profiles.Profile, found) -> str | None:
    """Its container started again since `seat up` (a restart loads what is there then), or its
    weights are no longer those the full verify vouched for (rewritten while it loaded them);
    read where the container mounts them from, or the native seat's own folders."""
    if found is None:
        return verify.unvouched_models(profile, {})
    if docker.restarted(found, running):
        return (
            "its container started again since `seat up` (its restart policy, a reboot or `docker "
            "restart`): nothing checked what it loaded then"
        )
    sources = {m.get("Destination"): m.get("Source") for m in found.attrs.get("Mounts") or []}
    knobs = {
        f"SEAT_MODEL_{k.upper()}_DIR": sources[m.mount]
        for k, m in profile.models.items()
        if m.mount in sources
    }
    return verify.unvouched_models(profile, knobs)


def _unproven(running: launch.Running) -> str | None:
    """Who listens on the seat's port, around each group: raises on a stranger; why the seat
    could not be proven alone there, or None."""
    proof = launch.require_identity(running)
    if proof == identity.OURS:
        return None
    return "nothing proved the seat alone on its port: " + proof.removeprefix("unverifiable: ")


def of_url(url: str, model: str, k: int | None, api_key: str | None) -> Target:
    """Credentials in the URL (user:password@) go into a header, so no file or line shows them.
    A seat of this machine's `seat up` that the URL reaches is held to what `seat bench PROFILE`
    holds it to: its record's mark, and who answers on its port before and after each group."""
    url, credentials = text.split_credentials(url.rstrip("/"))
    headers = {}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    elif credentials:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(credentials).encode()).decode()
    conditions: dict = {"profile": None, "gpus": gpus.inventory()}
    seat = _seat_at(url)
    if isinstance(seat, str):
        return Target(url, model, headers, k=k, conditions={**conditions, "provenance": {"differs": [seat]}})
    running, profile = seat
    return Target(
        url,
        model,
        headers,
        k=k,
        conditions={**conditions, **_marks(running, profile, _container(running, profile))},
        verify=lambda: _unproven(running),
    )


# The mark of a server no run record of this machine names: the kit checked nothing of what it runs.
NO_RECORD = "benched by URL: no `seat up` of this machine runs it, so nothing checked what it runs"


def _seat_at(url: str) -> tuple[launch.Running, profiles.Profile] | str:
    """The seat of this machine's `seat up` that the URL reaches (reach.reaches, however the URL
    spells its address) and the profile file it was launched from, still as launched; else why
    its results are unverified: NO_RECORD for any other server (a script's or compose's launch,
    another machine's, another kit's), or why the seat's own profile cannot judge it now."""
    skipped: tuple[type[BaseException], ...] = (SeatError, *engine.errors())
    for record in sorted(layout.run_records().glob("*.json")):
        try:
            running = launch.recorded(record.stem)
            if not (running and reach.reaches(url, running.url) and launch.alive(running)):
                continue
        except skipped:  # a torn record, a lost engine
            continue
        try:
            profile = profiles.load(running.profile_source or running.profile)
            if bound.seat_of(profile) is not None:
                return running, profile
        except SeatError as exc:  # its own mark, and why nothing else of it can be checked
            recorded = what_runs.mark(running.conditions())
            why = f"benched by URL, and {running.profile}'s profile cannot judge its seat: {exc.message}"
            return "; ".join(filter(None, (recorded, why)))
    return NO_RECORD
