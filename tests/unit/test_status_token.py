"""`seat status` never shows the run token: it proves which `seat up` owns the record and the seat."""

import json
import os
import time

from click.testing import CliRunner

from seatkit.cli.app import seat
from seatkit.serve import launch
from seatkit.serve.backends.native import process_start


def test_status_prints_no_run_token_as_text_or_json(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    token = "5eca" * 8
    run = launch.Running(
        "cpu-smoke",
        "native",
        str(os.getpid()),
        "http://127.0.0.1:9",
        "tiny",
        str(tmp_path / "cpu-smoke.log"),
        time.time(),
        since=process_start(os.getpid()),
        token=token,
    )
    monkeypatch.setattr(
        launch, "status", lambda profile: {**launch.asdict(run), "state": "running", "health": 200}
    )
    text = CliRunner().invoke(seat, ["status", "cpu-smoke"]).output
    assert "process id" in text and token not in text and "token" not in text, text
    shown = CliRunner().invoke(seat, ["status", "cpu-smoke", "--json"]).output
    assert "token" not in json.loads(shown) and token not in shown
