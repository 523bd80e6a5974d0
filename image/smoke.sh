#!/bin/sh
# Build-time smoke test: import each module the seat needs (space-separated in $1).
# Nothing to import (a base without Python, in tests) skips it.
set -eu
[ -n "${1:-}" ] || { echo "seatkit smoke test: no modules to import, skipped"; exit 0; }
exec python3 /opt/seatkit/smoke.py "$1"
