"""The `seat` executable: Ctrl-C and SIGTERM end it cleanly, from its first instant.

SIGTERM (a supervisor, `kill`, `timeout`) raises SystemExit like an error would, so every cleanup
on the way out runs: a half-started seat is stopped, a helper container removed.
"""

import signal
import sys


def _terminated(signum, frame):
    print("terminated", file=sys.stderr)
    raise SystemExit(128 + signum)


def main():
    signal.signal(signal.SIGTERM, _terminated)
    try:
        from seatkit.cli import app
    except KeyboardInterrupt:  # the CLI's modules take a moment to import
        print("aborted", file=sys.stderr)
        sys.exit(130)
    app.main()
