"""What the bench measures: a running seat of a profile, or any OpenAI-compatible URL, with the
host's and the image's facts about it (which is why it sits above bench, host and image)."""

from __future__ import annotations

import base64

from seatkit import engine, text
from seatkit.bench.target import Target
from seatkit.errors import SeatError
from seatkit.host import gpus
from seatkit.image import b12x
from seatkit.models import lock as model_locks
from seatkit.seat import layout, profiles, what_runs
from seatkit.serve import launch


def of_profile(name: str) -> Target:
    """The seat `seat up` started for the profile, with the profile's conditions."""
    profile = profiles.load(name)
    running = launch.recorded(profile.name)
    if running is None or not launch.alive(running):
        raise SeatError(f"{profile.name} is not up", f"seat up {profile.name}, or pass --url and --model")
    spec = profile.speculative
    labels, mounts = _labels(running)
    draft = profile.models[spec.draft_model] if spec and spec.draft_model else None
    return Target(
        running.url,
        running.model,
        launch.headers(running),
        k=spec.num_speculative_tokens if spec else None,
        conditions={
            "profile": profile.name,
            "profile_sha256": profile.sha256,
            "draft_method": spec.method if spec else None,
            "draft_policy": (spec.config.get("draft_sample_method", "greedy") if spec else None),
            "base_model": _model_name(profile.models[profile.model]),
            "draft_model": _model_name(draft) if draft else None,
            "model_locks": model_locks.hashes(profile),
            "image": profile.image.reference if profile.image else None,
            "image_labels": labels,
            "b12x_kernels": b12x.kernels(labels, b12x.mounted_over(mounts, profile.image.b12x_dir))
            if profile.image
            else None,
            "runtime": profile.runtime,
            "gpus": gpus.inventory(),
            **what_runs.conditions(profile),
        },
        verify=lambda: launch.require_identity(running),
    )


def _model_name(model) -> str:
    return model.host_dir or f"{model.build} (built locally)"


def _labels(running: launch.Running) -> tuple[dict | None, list[dict]]:
    """The container's image labels (base digest, overlay hashes, once `seat build` sets them) and
    its mounts."""
    if not launch.in_container(running):
        return None, []
    container = engine.client().containers.get(running.ident)
    return container.image.labels, container.attrs.get("Mounts") or []


def of_url(url: str, model: str, k: int | None, api_key: str | None) -> Target:
    """Credentials in the URL (user:password@) go into a header, so no file or line shows them."""
    url, credentials = text.split_credentials(url.rstrip("/"))
    headers = {}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    elif credentials:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(credentials).encode()).decode()
    return Target(
        url,
        model,
        headers,
        k=k,
        conditions={"profile": None, "gpus": gpus.inventory(), **_local_experiment(url)},
    )


def _local_experiment(url: str) -> dict:
    """A seat of this machine's `seat up` at that URL marks its results as its profile does."""
    skipped: tuple[type[BaseException], ...] = (SeatError, *engine.errors())
    for record in sorted(layout.run_records().glob("*.json")):
        try:
            running = launch.recorded(record.stem)
            if running and running.url == url and launch.alive(running):
                return what_runs.conditions(profiles.load(running.profile))
        except skipped:  # a torn record, a deleted profile, a lost engine
            continue
    return {}
