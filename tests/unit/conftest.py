"""Fixtures shared by the unit tests of one area (a test file asks for them by name)."""

import pytest

from seatkit.host import gpus


@pytest.fixture
def no_nvml(monkeypatch):
    """No GPU inventory: the host tests judge files, not this machine's driver."""
    monkeypatch.setattr(gpus, "inventory", lambda system=None: None)
