"""seatkit/serve/backends/native.py: a native seat was recorded verified whatever its venv held
(review4): preflight asked only that bin/vllm exist, and nothing at `seat up` read the venv, so a
bin/vllm that is another program served numbers the record called verified. Now its run is
marked, with `seat setup` as the fix."""

import os

import yaml
from conftest import stand_in_server

from seatkit.models import lock, verify
from seatkit.seat import profiles
from seatkit.serve import launch
from seatkit.serve import spec as specs


def test_a_native_seat_whose_vllm_is_another_program_is_recorded_verified(home):
    # No install marker, no vllm package, no python: bin/vllm is a shell script of anyone's.
    stand_in_server(home, "exec sleep 300")
    path = home / "plain.yaml"
    path.write_text(yaml.safe_dump({"extends": "cpu-smoke"}))
    profile = profiles.load(str(path))
    lock.write(profile, lock.make(profile))
    assert verify.verify(profile, full=True)["ok"]  # the weights are vouched for: only the code is not
    started = launch._start(specs.build(profile), dict(os.environ))
    try:
        record = launch.recorded("plain")
        assert record.unverified is not None, "a seat whose server nothing checked is recorded verified"
    finally:
        launch.stop(started, grace=5)
