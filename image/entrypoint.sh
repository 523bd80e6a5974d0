#!/bin/sh
# Verify the installed overlay against the lock built into the image, then run the command.
# SEAT_SKIP_OVERLAY_CHECK=1 skips the check (for debugging a changed tree on purpose).
set -eu
if [ "${SEAT_SKIP_OVERLAY_CHECK:-0}" != 1 ]; then
  if ! report=$(cd "$SEAT_OVERLAY_DIR" && grep -v '^#' /opt/seatkit/overlay.lock | sha256sum -c - 2>&1); then
    echo "seatkit: the overlay in $SEAT_OVERLAY_DIR does not match the lock built into this image:" >&2
    printf '%s\n' "$report" | grep -v ': OK$' | head -n 50 >&2
    echo "seatkit: not starting (SEAT_SKIP_OVERLAY_CHECK=1 starts anyway)" >&2
    exit 78
  fi
fi
exec "$@"
