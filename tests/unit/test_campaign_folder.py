"""seatkit/campaign/folder.py: each campaign gets its own folder."""

from __future__ import annotations

from campaign_harness import CampaignHost, FastDriver, start, write_campaign

from seatkit.campaign import runner


def test_a_campaign_started_in_the_same_second_as_the_last_one_gets_its_own_folder(tmp_path, monkeypatch):
    """The folder was named by the second alone: a rerun in the second the last one ended (a script,
    a profile-arm campaign that ends at once) died on FileExistsError with a traceback."""
    monkeypatch.setattr(runner.time, "strftime", lambda fmt, t=None: "20261202T150000Z")
    host = CampaignHost(tmp_path / "root")
    campaign = write_campaign(tmp_path, host=None, arms=[{"name": "k3", "profile": "cpu-smoke"}])
    first = start(host, campaign)
    assert runner.step(host.system, FastDriver(host)) == "done"
    second = start(host, campaign)
    assert second != first and runner.step(host.system, FastDriver(host)) == "done"
    assert host.path(f"{first}/report.json").exists() and host.path(f"{second}/report.json").exists()
