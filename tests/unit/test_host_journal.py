"""seatkit/host/journal.py: a torn, damaged or unreadable journal is named, never read as an empty one."""

from __future__ import annotations

import json

import pytest
from fake_host import FakeHost, apply, make_plan

from seatkit.errors import SeatError
from seatkit.host import change, status
from seatkit.host.journal import JOURNAL, Journal
from seatkit.seat import host_profiles

pytestmark = pytest.mark.usefixtures("no_nvml")


def test_a_torn_last_line_is_an_interrupted_step_and_every_command_still_works(tmp_path):
    host = FakeHost(tmp_path, "grub")
    pristine = host.tree()
    apply(host)
    journal = host.path(JOURNAL)
    data = journal.read_bytes()
    journal.write_bytes(data[:-12])  # the commit record cut short, as a crash or a full disk does
    assert status.status(host_profiles.load("paper"), host.system)["transactions"]["interrupted"]
    assert any("interrupted" in r for r in make_plan(host).refusals)
    with pytest.raises(SeatError, match="recover"):
        change.rollback(host.system)
    assert len(change.recover(host.system)) == 1
    assert host.tree() == pristine and Journal(host.system).open() == []
    assert all(json.loads(line) for line in journal.read_bytes().splitlines())


def test_a_damaged_line_in_the_middle_is_named(tmp_path):
    host = FakeHost(tmp_path, "grub")
    apply(host)
    journal = host.path(JOURNAL)
    lines = journal.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"tx": "x", "type": \n'
    journal.write_bytes(b"".join(lines))
    for act in (
        lambda: make_plan(host),
        lambda: change.recover(host.system),
        lambda: status.status(host_profiles.load("paper"), host.system),
    ):
        with pytest.raises(SeatError, match=r"journal.jsonl line 3 is damaged"):
            act()


def test_a_journal_that_cannot_be_read_or_written_is_a_clear_error_not_an_empty_journal(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.path(JOURNAL).mkdir(parents=True)  # a folder in its place
    with pytest.raises(SeatError, match="cannot read .*journal.jsonl"):
        Journal(host.system).open()
    with pytest.raises(SeatError, match="cannot (read|write) .*journal.jsonl"):
        apply(host)
    with pytest.raises(SeatError, match="cannot write .*journal.jsonl"):
        Journal(host.system).append({"tx": "x", "type": "begin"})


def test_a_new_journals_first_record_survives_a_power_cut(tmp_path):
    """A new file is durable once its folder's entry for it is: the record's fsync alone keeps its
    bytes but not its name, and a journal lost whole would hide the change it began."""
    host = FakeHost(tmp_path, "grub")
    with host.write_loss() as disk:
        Journal(host.system).append({"tx": "t1", "type": "begin"})
        disk.power_cut()
    assert Journal(host.system).records() == [{"tx": "t1", "type": "begin"}]
