#!/bin/sh
# Verify the installed overlays against the locks built into the image, then run the command.
# SEAT_SKIP_OVERLAY_CHECK=1 skips the check (for debugging a changed tree on purpose).
set -eu
check() {  # check LOCK DIR WHAT
  if ! report=$(cd "$2" && grep -v '^#' "$1" | sha256sum -c - 2>&1); then
    echo "seatkit: the $3 in $2 does not match the lock built into this image:" >&2
    printf '%s\n' "$report" | grep -v ': OK$' | head -n 50 >&2
    echo "seatkit: not starting (SEAT_SKIP_OVERLAY_CHECK=1 starts anyway)" >&2
    exit 78
  fi
}
if [ "${SEAT_SKIP_OVERLAY_CHECK:-0}" != 1 ]; then
  check /opt/seatkit/overlay.lock "$SEAT_OVERLAY_DIR" overlay
  # The b12x overlay, when the image carries one (overlay/b12x.lock at build time).
  [ ! -f /opt/seatkit/b12x.lock ] || check /opt/seatkit/b12x.lock "$SEAT_B12X_DIR" "b12x overlay"
fi
exec "$@"
