"""A docker seat is verified when the image it runs has the id `seat build` recorded AND that record's
pins equal the pins in force; anything else starts, and the difference is every result's mark.
A fake engine: an image is its id (a content hash), nothing inside it is read."""

import json
from dataclasses import replace

import pytest
import yaml
from docker.errors import NotFound

from seatkit import engine
from seatkit.bench import report
from seatkit.doctor import image as doctor_image
from seatkit.image import vouch
from seatkit.models import verify
from seatkit.seat import layout, overlay_lock, profiles, what_runs
from seatkit.serve import launch, preflight, provenance
from seatkit.serve import spec as specs
from seatkit.serve.backends import docker

TAG = "seatkit/try:overlay-1"
BUILT = "sha256:" + "a" * 64  # the id `seat build` made
OTHER = "sha256:" + "0" * 64  # another image, retagged under TAG since
BASE = "registry.invalid/vllm@sha256:" + "d" * 64  # the base the profile pins


class Engine:
    """images: ref -> id; the seat's container records the image it was made from."""

    def __init__(self, images: dict[str, str]):
        self.by_ref, self.seats = images, []
        self.images = self.containers = self

    def get(self, ref):
        if ref in self.by_ref:
            return type("Image", (), {"id": self.by_ref[ref]})
        if ref == "c" * 64:  # the running seat's container
            image = type("Image", (), {"id": self.seats[-1]})
            return type("Container", (), {"image": image, "attrs": {"State": {"StartedAt": "T0"}}})
        raise NotFound(ref)

    def create(self, image, *argv, **kwargs):
        self.seats.append(image)
        return type("Seat", (), {"id": "c" * 64, "start": lambda self: None})()


@pytest.fixture
def seat(tmp_path, monkeypatch):
    """A profile over cpu-smoke-docker (overlay true, its base pinned), the engine holding the image
    `seat build` made under TAG; its weights are test_model_marks's business."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    path = tmp_path / "try.yaml"
    path.write_text(yaml.safe_dump({"extends": "cpu-smoke-docker", "image": {"overlay": True}}))
    monkeypatch.setattr(vouch.base_pins, "base_reference", lambda p, allow_unpinned=False: (BASE, "d"))
    client = Engine({TAG: BUILT, BASE: "sha256:" + "e" * 64})
    monkeypatch.setattr(engine, "client", lambda: client)
    monkeypatch.setattr(preflight, "run", lambda spec, values: None)
    monkeypatch.setattr(verify, "unvouched_models", lambda profile, environ: None)
    monkeypatch.setattr(provenance, "launch_differs", lambda spec, sha256: None)  # test_provenance's
    return profiles.load(str(path)), client


def started(profile, image=TAG, image_check=vouch.image_check) -> launch.Running:
    """`seat up`'s start of the profile's seat with SEAT_IMAGE=image: its run record."""
    launch._start(specs.build(profile), {"SEAT_IMAGE": image}, image_check)
    return launch.recorded(profile.name)


def built_from(profile, **changed) -> dict[str, str]:
    """The pins in force, as `seat build` would record them, some changed."""
    return {**vouch.pins_now(profile), **changed}


def test_the_image_seat_build_recorded_from_the_pins_in_force_is_verified(seat):
    profile, client = seat
    vouch.record(TAG, BUILT, built_from(profile))
    record = started(profile)
    assert record.provenance["differs"] == [] and what_runs.mark(record.conditions()) is None
    assert client.seats == [BUILT]  # run by the id checked, never by the tag
    row = doctor_image.overlay(profile, TAG, record)
    assert row.status == "OK" and row.evidence.startswith(
        "the running container cccccccccccc: image sha256:aaaa"
    )


def test_the_record_holds_the_kits_locks_and_where_the_profile_puts_them(seat):
    profile, _ = seat
    pins = vouch.pins_now(profile)
    assert pins["base"] == BASE and pins["overlay lock"] == overlay_lock.load().sha256
    assert pins["vllm_dir"] == profile.image.vllm_dir and pins["kit version"]
    assert pins["b12x lock"] == "none" and not overlay_lock.B12X_LOCK.exists()


def test_a_retagged_image_is_marked_and_the_mark_reaches_its_numbers(seat):
    """Same tag, other id: whatever it holds, it is not the image the record proves."""
    profile, client = seat
    vouch.record(TAG, BUILT, built_from(profile))
    client.by_ref[TAG] = OTHER
    record = started(profile)
    assert what_runs.mark(record.conditions()) == (
        f"image sha256:{'0' * 12} ({TAG}) is not the one `seat build` recorded under that tag "
        f"(sha256:{'a' * 12}): it was retagged or rebuilt since; run seat build {profile.name}"
    )
    assert client.seats == [OTHER]  # started, by the id checked, and marked
    summary = {"conditions": record.conditions(), "suites": {"code": {"content": "code", "requests": 1}}}
    assert report.rows(summary)[0][0] == "code UNVERIFIED"


def test_an_image_built_from_an_older_overlay_lock_is_marked_with_the_difference(seat):
    profile, _ = seat
    kit = overlay_lock.load()
    older = replace(kit, commit="b" * 40)
    vouch.record(TAG, BUILT, built_from(profile, **{"overlay lock": older.sha256}))
    why = what_runs.mark(started(profile).conditions())
    assert why == (
        f"image sha256:{'a' * 12} ({TAG}) was built from other pins than those in force (overlay lock "
        f"{older.sha256[:12]}.., pins now {kit.sha256[:12]}..): run seat build {profile.name}"
    )


@pytest.mark.parametrize(
    "pin, value",
    [
        ("base", "registry.invalid/vllm@sha256:" + "9" * 64),  # an earlier pin of the base
        ("b12x lock", "c" * 64),  # other kernels than the kit pins now
        ("vllm_dir", "/opt/elsewhere/vllm"),  # the overlay copied where the profile no longer says
        ("build recipe", "f" * 64),  # the kit's Dockerfile or image scripts changed since
        ("kit version", "0.0.1"),
    ],
)
def test_each_pin_that_differs_from_the_one_in_force_is_named(seat, pin, value):
    profile, _ = seat
    vouch.record(TAG, BUILT, built_from(profile, **{pin: value}))
    why = vouch.image_check(profile, TAG)[1]
    assert why is not None and f"({pin} " in why and why.endswith(f"run seat build {profile.name}")


def test_a_record_of_an_older_kit_or_a_torn_one_proves_nothing(seat):
    profile, _ = seat
    vouch.record(TAG, BUILT, built_from(profile))
    path = next(layout.build_records().glob("*.json"))
    old = json.loads(path.read_text())
    del old["pins"]["build recipe"]  # recorded before the kit pinned its recipe
    path.write_text(json.dumps(old))
    assert "build recipe unrecorded" in vouch.image_check(profile, TAG)[1]
    path.write_text('{"tag": "' + TAG)  # torn
    assert "is not one `seat build` recorded on this machine" in vouch.image_check(profile, TAG)[1]


def test_an_image_the_kit_never_built_is_marked(seat, tmp_path):
    """A prebuilt image (image.overlay false): started, and nothing checked what it runs."""
    profile, client = seat
    path = tmp_path / "asis.yaml"
    path.write_text(yaml.safe_dump({"extends": "cpu-smoke-docker"}))
    as_is = profiles.load(str(path))
    assert not as_is.image.overlay
    why = what_runs.mark(started(as_is, image=BASE).conditions())
    assert why == f"image sha256:{'e' * 12} ({BASE}) is not one `seat build` recorded on this machine: " + (
        "nothing checked what it runs"
    )
    assert client.seats == ["sha256:" + "e" * 64]


def test_a_base_not_pinned_by_digest_is_never_verified(seat, monkeypatch):
    profile, _ = seat
    monkeypatch.setattr(vouch.base_pins, "base_reference", lambda p, allow_unpinned=False: ("vllm:t", None))
    vouch.record(TAG, BUILT, built_from(profile))  # built --allow-unpinned, from the same tag
    why = vouch.image_check(profile, TAG)[1]
    assert why is not None and "not pinned by digest" in why and "seat image pin" in why


def test_a_seat_started_without_the_image_check_is_marked(seat):
    profile, client = seat
    vouch.record(TAG, BUILT, built_from(profile))
    assert what_runs.mark(started(profile, image_check=None).conditions()) == docker.UNCHECKED
    assert client.seats == [TAG]


def test_an_experiment_carries_both_reasons(seat, tmp_path):
    _, _ = seat
    path = tmp_path / "exp.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "extends": "cpu-smoke-docker",
                "env": {"PYTHONPATH": "/srv/patched"},
                "experiment": {"unverified": True, "reason": "a patched scheduler"},
            }
        )
    )
    record = started(profiles.load(str(path)), image=BASE)
    assert what_runs.mark(record.conditions()).startswith("a patched scheduler; ")
    assert "off the allowlist: env.PYTHONPATH" in what_runs.mark(
        record.conditions()
    ) and "; image sha256:" in what_runs.mark(record.conditions())
    assert what_runs.marked("x", what_runs.mark(record.conditions())).startswith(
        "x UNVERIFIED (a patched scheduler; "
    )


def test_doctor_says_what_seat_up_says_of_the_image_the_seat_runs(seat):
    """The running container's image, not the one the tag names now: a seat started verified is
    still verified after the tag moved, and a rebuilt one under the tag is judged on its own."""
    profile, client = seat
    vouch.record(TAG, BUILT, built_from(profile))
    record = started(profile)
    client.by_ref[TAG] = OTHER
    row = doctor_image.overlay(profile, TAG, record)
    assert row.status == "OK", row
    vouch.record(TAG, BUILT, built_from(profile, **{"overlay lock": "1" * 64}))
    row = doctor_image.overlay(profile, TAG, record)
    assert row.status == "FAIL" and "overlay lock 111111111111.., pins now" in row.evidence, row
    assert row.fix == f"seat build {profile.name}, then seat down {profile.name} && seat up {profile.name}"
    row = doctor_image.overlay(profile, TAG, None)
    assert (
        row.status == "FAIL"
        and "retagged or rebuilt" in row.evidence
        and row.fix == f"seat build {profile.name}"
    )


def test_doctor_names_a_stray_seat_image_that_is_no_image_reference_not_the_engine(seat, monkeypatch):
    """A SEAT_IMAGE left in the shell that is no image reference (a capital letter, a pasted
    space) is said as the knob it is. Reproduction: `SEAT_IMAGE=Seatkit/Try:overlay-1 seat doctor
    try.yaml` with an engine that answers (it refuses the reference with a 400, as dockerd does):
    the knob's grammar is now checked only where the seat is launched, so doctor hands the value
    to the engine and its overlay row says "cannot check: no docker engine answers"."""
    import requests
    from click.testing import CliRunner
    from docker.errors import APIError

    from seatkit.cli.app import seat as seat_command

    profile, client = seat
    real_get = client.get

    def get(ref):
        if ref != ref.lower():
            refused = requests.Response()
            refused.status_code = 400
            raise APIError("400 Client Error: Bad Request", refused, "invalid reference format")
        return real_get(ref)

    monkeypatch.setattr(client, "get", get)
    monkeypatch.setenv("SEAT_IMAGE", "Seatkit/Try:overlay-1")
    done = CliRunner().invoke(seat_command, ["doctor", profile.source])
    said = " ".join(done.output.split())
    assert "no docker engine answers" not in said, said
    assert "SEAT_IMAGE" in said, said
