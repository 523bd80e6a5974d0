"""Progress of a long command: a spinner in a terminal, plain lines when stderr is a log or pipe.

Plain lines name the command and stage; a message that only counts waited seconds again ("… (12 s)")
is repeated at most every REPEAT_S, so a log gets a heartbeat, not a flood. Every other message is
a line of its own.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape

REPEAT_S = 10.0


class PlainLines:
    def __init__(self, console: Console, what: str):
        self.console, self.what = console, what
        self.last_shape: str | None = None
        self.last_time = 0.0

    def __call__(self, message: str) -> None:
        shape = re.sub(r"\(\d+ s\)", "", message)  # the message without its waited seconds
        now = time.monotonic()
        if shape == self.last_shape and now - self.last_time < REPEAT_S:
            return
        self.last_shape, self.last_time = shape, now
        self.console.print(f"{escape(self.what)}: {escape(message)}", highlight=False, soft_wrap=True)
        self.console.file.flush()


@contextmanager
def progress(console: Console, what: str) -> Iterator[Callable[[str], None]]:
    """Yields `update(message)`."""
    if console.is_terminal:
        with console.status(escape(what)) as status:
            yield lambda message: status.update(escape(f"{what}: {message}"))
    else:
        update = PlainLines(console, what)
        update("started")
        yield update
