"""Every data file the kit reads (YAML, JSON, text), with a clear error for each way an accident
leaves it: not there, too large for what it should be, not UTF-8, not valid, or a YAML key written
twice (an edit whose second value would silently win; JSON files are the kit's own output)."""

from __future__ import annotations

import json
from collections.abc import Hashable
from pathlib import Path

import yaml

from seatkit.errors import SeatError

MAX_BYTES = 256 * 1024


class _Loader(yaml.SafeLoader):
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
    for the caller to explain; any other failure to read it is a SeatError."""
    try:
        if path.stat().st_size > limit:
            raise SeatError(
                f"{path}: larger than {limit // 1024} KiB, too large for a {what}",
                "the kit's data files are a few pages; check that this is the right file",
            )
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise
    except OSError as exc:  # a link loop, no permission, an I/O error: say so, never a traceback
        raise SeatError(
            f"{path}: cannot read this {what} ({exc.strerror or exc})",
            "check the file's permissions and what it links to",
        ) from None


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
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: a date the resolver cannot build
        raise SeatError(f"{path}: not valid YAML for a {what}: {exc}") from None
    finally:
        loader.dispose()


def read_json(path: Path, what: str = "file", limit: int = MAX_BYTES):
    """The parsed JSON document. NaN and Infinity parse (Python's json writes them) so that the
    schema that checks the document names the field that holds one."""
    try:
        return json.loads(read_text(path, what, limit))
    except ValueError as exc:
        raise SeatError(f"{path}: not valid JSON for a {what}: {exc}") from None
