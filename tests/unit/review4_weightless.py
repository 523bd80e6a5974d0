"""review4: refused_weightless (load-format dummy, random weights) keys on the profile's
models.<key>.files, what preflight checks (default [config.json]), not on the models lock, which
pins the weight files the seat is said to serve. A variant that names fewer files serves random
weights while its models lock (model.safetensors, 272 MB) still verifies: verified numbers of
weights no lock saw."""

import yaml

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.models import lock
from seatkit.seat import profiles


def test_dummy_weights_pass_once_files_names_no_weight_file(tmp_path):
    folder = tmp_path
    path = folder / "cpu-smollm2-r4.yaml"
    # The lock: cpu-smollm2's (locks are per profile: copied as `seat model lock` would write it).
    (folder / "cpu-smollm2-r4.models.lock").write_text(
        (paths.PROFILES / "cpu-smollm2.models.lock")
        .read_text()
        .replace("profile: cpu-smollm2", "profile: cpu-smollm2-r4")
    )
    path.write_text(
        yaml.safe_dump(
            {
                "extends": "cpu-smollm2",
                "models": {"base": {"files": ["config.json", "tokenizer.json"]}},
                "vllm_args": {"load-format": "dummy"},
            }
        )
    )
    try:
        profile = profiles.load(str(path))
    except (SeatError, ValueError):
        return  # refused: as the rule says for a profile whose weights are locked
    locked = lock.read(profile)
    weights = [f.path for f in locked["base"].files if f.path.endswith(".safetensors")] if locked else []
    assert profile.experiment is None and profile.vllm_args["load-format"] == "dummy"
    assert not weights, f"verified profile serves random weights in place of locked {weights}"
