"""YAML data files read defensively: bounded size, no duplicate keys, no anchors or aliases.

PyYAML's safe loader still expands aliases, so a few hundred bytes of nested aliases can build
gigabytes ("billion laughs"), and a repeated key silently wins over the first. The kit's data files
need neither: a variant profile uses `extends`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Hashable
from pathlib import Path

import yaml

from seatkit.errors import SeatError

MAX_BYTES = 256 * 1024


class _Loader(yaml.SafeLoader):
    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent) or getattr(self.peek_event(), "anchor", None):
            mark = self.peek_event().start_mark
            raise yaml.constructor.ConstructorError(
                None, None, "anchors and aliases (&name, *name) are not allowed in this file", mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # the base loader refuses it: "found unhashable key"
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def read(path: Path, what: str = "file", limit: int = MAX_BYTES):
    """The parsed document; FileNotFoundError passes through for the caller to explain."""
    # Opened without blocking and checked before reading: a FIFO or a device would hang or never end.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(path)
        raise SeatError(f"{path}: not a regular file", f"give the path of the {what} itself")
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise SeatError(f"{path}: larger than {limit // 1024} KiB, too large for a {what}",
                        "the kit's data files are a few pages; check that this is the right file")
    try:
        loader = _Loader(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SeatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    loader.name = str(path)  # error marks name the file, not "<unicode string>"
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise SeatError(f"{path}: not valid YAML for a {what}: {exc}") from None
    except RecursionError:
        raise SeatError(f"{path}: not valid YAML for a {what}: nested too deeply") from None
    finally:
        loader.dispose()
