"""seatkit/host/cmdline.py: kernel command-line edits keep every byte they do not own."""

from __future__ import annotations

import re

import pytest
from fake_host import FakeHost, edited_tokens, make_plan
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from seatkit.errors import SeatError
from seatkit.host import cmdline

pytestmark = pytest.mark.usefixtures("no_nvml")


PIECES = st.sampled_from(
    [
        b"quiet",
        b"ro",
        b"root=UUID=abc",
        b'acpi_osi="Windows 2015"',
        b"iommu=pt",
        b"amd_iommu=on",
        b"caf\xe9=1",
        b"\xff\xfe",
        b'x="a\tb"',
        b"splash",
        b"console=ttyS0,115200n8",
        b"iommu=off",
    ]
)


SEPARATORS = st.sampled_from([b" ", b"  ", b"\t", b" \t "])


ENDINGS = st.sampled_from([b"", b"\n", b"\r\n", b" \n", b"\t\r\n"])


@st.composite
def hostile_lines(draw):
    words = draw(st.lists(PIECES, max_size=12)) + [
        b"p%d=v" % i for i in range(draw(st.sampled_from([0, 0, 150])))
    ]
    out = draw(st.sampled_from([b"", b" ", b"\t"]))
    for word in words:
        out += word + draw(SEPARATORS)
    return out.rstrip(b" \t") + draw(ENDINGS)


@hyp_settings(max_examples=300, deadline=None)
@given(hostile_lines(), st.sampled_from([["iommu=off", "amd_iommu=off"], ["iommu=pt"]]))
def test_token_edits_keep_every_byte_they_do_not_own(line, wanted):
    tokens = cmdline.split(line)
    edit = cmdline.plan(tokens, wanted, replace=True)
    out = cmdline.edit_bytes(line, edit)
    assert cmdline.split(out) == edited_tokens(tokens, edit)
    trailing = line[cmdline.spans(line)[-1][1] :] if tokens else line
    assert out.endswith(trailing)  # the newline, CRLF or tabs at the end stay
    if not edit.replaced:  # nothing removed: the old bytes are all there, ours appended after them
        added = " ".join(edit.added).encode()
        cut = len(line) - len(trailing)
        assert out == (line[:cut] + (b" " if tokens and added else b"") + added + trailing)
    kept = [line[s:e] for i, (s, e) in enumerate(cmdline.spans(line)) if i not in dict(edit.replaced)]
    assert [out[s:e] for s, e in cmdline.spans(out)][: len(kept)] == kept
    assert cmdline.plan(cmdline.split(out), wanted, replace=False).empty


def test_kernel_quoting_keeps_quoted_values_whole():
    assert cmdline.split(b'a acpi_osi="Windows 2015"\tb="x y"z c') == [
        "a",
        'acpi_osi="Windows 2015"',
        'b="x y"z',
        "c",
    ]
    with pytest.raises(SeatError, match="unbalanced double quote"):
        cmdline.edit_bytes(b'root=x foo="open\n', cmdline.Edit(("iommu=pt",)))


@pytest.mark.parametrize("stack", ["grub", "systemd-boot"])
def test_a_command_line_past_2047_bytes_is_refused_with_its_length(tmp_path, stack):
    long = " ".join(f"param{i}=value{i}" for i in range(150))
    host = FakeHost(tmp_path, stack, cmdline=long)
    plan = make_plan(host)
    (reason,) = [r for r in plan.refusals if "COMMAND_LINE_SIZE" in r]
    assert re.search(r"would be 2\d{3} bytes; the kernel keeps 2047", reason)
    assert not make_plan(FakeHost(tmp_path / "short", stack, cmdline=long[:1500])).refusals
