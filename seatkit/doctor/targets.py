"""What the bench measures: a running seat of a profile, or any OpenAI-compatible URL, with the
host's and the image's facts about it (which is why it sits above bench, host and image)."""

from __future__ import annotations

import base64

from seatkit import engine, text
from seatkit.bench.target import Target
from seatkit.errors import SeatError
from seatkit.host import gpus
from seatkit.image import b12x
from seatkit.seat import layout, profiles, what_runs
from seatkit.serve import bound, launch, reach


def of_profile(name: str) -> Target:
    """The seat `seat up` started for the profile, with the profile's conditions (refused when the
    profile was edited since: they would not be the seat's) and the mark its record holds."""
    profile = profiles.load(name)
    running = bound.seat_of(profile)
    if running is None:
        raise SeatError(f"{profile.name} is not up", f"seat up {profile.name}, or pass --url and --model")
    spec = profile.speculative
    labels, mounts = _container(running, profile)
    draft = profile.models[spec.draft_model] if spec and spec.draft_model else None
    return Target(
        running.url,
        running.model,
        launch.headers(running),
        k=spec.num_speculative_tokens if spec else None,
        conditions={
            "profile": profile.name,
            "profile_sha256": running.profile_sha256 or None,  # as launched; None: not recorded
            "draft_method": spec.method if spec else None,
            "draft_policy": (spec.config.get("draft_sample_method", "greedy") if spec else None),
            "base_model": _model_name(profile.models[profile.model]),
            "draft_model": _model_name(draft) if draft else None,
            "model_locks": running.model_locks,  # as locked at `seat up`, not as the lock reads now
            "image": profile.image.reference if profile.image else None,
            "image_labels": labels,
            "b12x_kernels": b12x.kernels(labels, b12x.mounted_over(mounts, profile.image.b12x_dir))
            if profile.image
            else None,
            "runtime": profile.runtime,
            "gpus": gpus.inventory(),
            **running.conditions(),  # what `seat up` recorded the seat runs (serve.provenance)
        },
        verify=lambda: launch.require_identity(running),
    )


def _model_name(model) -> str:
    return model.host_dir or f"{model.build} (built locally)"


def _container(running: launch.Running, profile: profiles.Profile) -> tuple[dict | None, list[dict]]:
    """The container's image labels (base digest, overlay hashes, once `seat build` sets them) and
    its mounts."""
    if not launch.in_container(running) or profile.image is None:
        return None, []
    container = engine.client().containers.get(running.ident)
    return container.image.labels, container.attrs.get("Mounts") or []


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
    running = seat
    return Target(
        url,
        model,
        headers,
        k=k,
        conditions={**conditions, **running.conditions()},
        verify=lambda: launch.require_identity(running),
    )


# The mark of a server no run record of this machine names: the kit checked nothing of what it runs.
NO_RECORD = "benched by URL: no `seat up` of this machine runs it, so nothing checked what it runs"


def _seat_at(url: str) -> launch.Running | str:
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
                return running
        except SeatError as exc:  # its own mark, and why nothing else of it can be checked
            recorded = what_runs.mark(running.conditions())
            why = f"benched by URL, and {running.profile}'s profile cannot judge its seat: {exc.message}"
            return "; ".join(filter(None, (recorded, why)))
    return NO_RECORD
