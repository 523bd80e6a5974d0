#!/bin/sh
# Run once at build time, by build-check.sh: the installed overlays against the locks built into the
# image (beside this script, in /opt/seatkit). The image's layers are immutable and its ID is what
# `seat build` records, so a check at every container start would prove nothing more
# (docs/threat-model.md: files written into a running container are out of scope).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
refuse() {  # refuse DIR WHAT REPORT
  echo "seatkit: the $2 in $1 does not match the lock built into this image:" >&2
  printf '%s\n' "$3" | head -n 50 >&2
  exit 1
}
hidden() {  # hidden LOCK: locked modules that Python would not load, a package or an extension
  # module of the same name beside them being found first
  grep -v '^#' "$1" | while read -r _ path; do
    case "$path" in *.py) stem=${path%.py} ;; *) continue ;; esac
    for other in "$stem"/__init__.py "$stem"/__init__.*so "$stem".so "$stem".*.so; do
      [ ! -e "$other" ] || echo "$path: HIDDEN by $other"
    done
  done
}
check() {  # check LOCK DIR WHAT
  report=$(cd "$2" && grep -v '^#' "$1" | sha256sum -c - 2>&1) ||
    refuse "$2" "$3" "$(printf '%s\n' "$report" | grep -v ': OK$')"
  report=$(cd "$2" && hidden "$1")
  [ -z "$report" ] || refuse "$2" "$3" "$report"
}
check "$here/overlay.lock" "$SEAT_OVERLAY_DIR" overlay
# The b12x overlay, when the image carries one (overlay/b12x.lock at build time).
[ ! -f "$here/b12x.lock" ] || check "$here/b12x.lock" "$SEAT_B12X_DIR" "b12x overlay"
