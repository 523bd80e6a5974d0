"""The embedded default's real model (SmolLM2-135M from the pinned PyPI wheel): its build is
deterministic and checked, and the seat it serves is greedy-deterministic across fresh starts and
answers the OpenAI client in the model's own chat format. Mechanics tests keep the tiny model."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, free_port, unavailable

from seatkit.errors import SeatError
from seatkit.models import lock as model_locks
from seatkit.seat import profiles
from seatkit.serve import runtime

PROFILE = "cpu-smollm2"
SEAT = str(BIN / "seat")


def seat(*args, env=None):
    done = subprocess.run(
        [SEAT, *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "250", **(env or {})},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def real_model():
    try:
        return runtime.setup(profiles.load(PROFILE), say=lambda m: print(f"setup: {m}"))
    except SeatError as exc:
        unavailable(f"could not build {PROFILE}'s model: {exc}")


def test_a_rebuild_in_an_empty_home_matches_the_models_lock_file_by_file(real_model, tmp_path, monkeypatch):
    """Nothing but the cached wheel and venv shared: the converter's output is the locked bytes."""
    home = tmp_path / "home"
    home.mkdir()
    for shared in ("venvs", "downloads"):
        (home / shared).symlink_to(Path(os.environ["SEAT_HOME"]) / shared)
    monkeypatch.setenv("SEAT_HOME", str(home))
    profile = profiles.load(PROFILE)
    built = runtime.ensure_model("smollm2-135m", profile.models["base"].files, real_model["venv"], say=print)
    assert built == home / "models" / "smollm2-135m" and not built.is_symlink()
    locked = {f.path: (f.size, f.sha256) for f in model_locks.read(profile)["base"].files}
    made = {f.path: (f.size, f.sha256) for f in model_locks.make(profile)["base"].files}
    assert made == locked


CHAT = """
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="none")
answer = client.chat.completions.create(model=sys.argv[2], temperature=0, max_tokens=48,
    messages=[{"role": "user", "content": "What is the capital of France? Answer in one sentence."}])
print(json.dumps({"text": answer.choices[0].message.content, "finish": answer.choices[0].finish_reason}))
"""


def test_two_fresh_starts_give_byte_identical_greedy_outputs_and_chat_answers(real_model, tmp_path):
    """`seat bench parity` on each of two starts of the seat; the first also answers the OpenAI
    client's chat completion, in the chat format (no ChatML markers leak into the text)."""
    records = []
    for start in range(2):
        env = {"SEAT_PORT": str(free_port())}
        seat("up", PROFILE, env=env)
        try:
            before = set(tmp_path.iterdir())
            seat("bench", "parity", PROFILE, "--max-tokens", "48", "--out", str(tmp_path), env=env)
            (record,) = set(tmp_path.iterdir()) - before
            records.append(record)
            if start == 0:
                status = json.loads(seat("status", PROFILE, "--json", env=env).stdout)
                done = subprocess.run(
                    [str(real_model["venv"] / "bin" / "python"), "-c", CHAT, status["url"], "smollm2"],
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                assert done.returncode == 0, done.stderr
                chat = json.loads(done.stdout)
        finally:
            seat("down", PROFILE, env=env)
    done = seat("bench", "parity-diff", str(records[0]), str(records[1]))
    assert "all byte-identical" in done.stdout and "diverges" not in done.stdout
    assert "Paris" in chat["text"] and chat["finish"] == "stop"
    assert "<|im_start|>" not in chat["text"] and "<|im_end|>" not in chat["text"]
