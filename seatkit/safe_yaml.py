"""Every data file the kit reads (YAML, JSON, text), read defensively: regular files of bounded
size only, no duplicate keys, no YAML anchors or aliases.

PyYAML's safe loader still expands aliases, so a few hundred bytes of nested aliases can build
gigabytes ("billion laughs"), and a repeated key silently wins over the first. The kit's data files
need neither: a variant profile uses `extends`. A FIFO would hang a plain read and a link to
/dev/zero would never end, so the file is opened without blocking and checked before it is read.
"""

from __future__ import annotations

import json
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
                None, None, "anchors and aliases (&name, *name) are not allowed in this file", mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # the base loader refuses it: "found unhashable key"
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def read_bytes(path: Path, what: str = "file", limit: int = MAX_BYTES) -> bytes:
    """The file's bytes; FileNotFoundError, IsADirectoryError and NotADirectoryError pass through
    for the caller to explain; any other failure to open or read it is a SeatError."""
    try:
        return _read_bytes(path, what, limit)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise
    except OSError as exc:  # a link loop, no permission, an I/O error: say so, never a traceback
        raise SeatError(
            f"{path}: cannot read this {what} ({exc.strerror or exc})",
            "check the file's permissions and what it links to",
        ) from None


def _read_bytes(path: Path, what: str, limit: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(path)
        raise SeatError(
            f"{path}: not a regular file (a pipe, socket or device)", f"give the path of the {what} itself"
        )
    if info.st_size > limit:
        os.close(fd)
        raise _too_large(path, what, limit)
    chunks, size = [], 0
    with os.fdopen(fd, "rb", buffering=0) as fh:
        # In pieces: read(limit) would allocate all of a large limit for a small file.
        while size <= limit and (chunk := fh.read(min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:  # it grew while read
        raise _too_large(path, what, limit)
    return data


def _too_large(path: Path, what: str, limit: int) -> SeatError:
    return SeatError(
        f"{path}: larger than {limit // 1024} KiB, too large for a {what}",
        "the kit's data files are a few pages; check that this is the right file",
    )


def read_text(path: Path, what: str = "file", limit: int = MAX_BYTES) -> str:
    try:
        return read_bytes(path, what, limit).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SeatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read(path: Path, what: str = "file", limit: int = MAX_BYTES):
    """The parsed YAML document; FileNotFoundError passes through for the caller to explain."""
    loader = _Loader(read_text(path, what, limit))
    loader.name = str(path)  # error marks name the file, not "<unicode string>"
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise SeatError(f"{path}: not valid YAML for a {what}: {exc}") from None
    except RecursionError:
        raise SeatError(f"{path}: not valid YAML for a {what}: nested too deeply") from None
    except (
        ValueError,
        OverflowError,
    ) as exc:  # a scalar the resolver cannot build (2001-13-45, a 5000-digit int)
        raise SeatError(f"{path}: not valid YAML for a {what}: {exc}") from None
    finally:
        loader.dispose()


def _unique(pairs: list[tuple]) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def read_json(path: Path, what: str = "file", limit: int = MAX_BYTES):
    """The parsed JSON document. NaN and Infinity parse (Python's json writes them) so that the
    schema that checks the document names the field that holds one."""
    text = read_text(path, what, limit)
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except ValueError as exc:
        raise SeatError(f"{path}: not valid JSON for a {what}: {exc}") from None
    except RecursionError:
        raise SeatError(f"{path}: not valid JSON for a {what}: nested too deeply") from None
