#!/bin/sh
# Run once at build time. $1: the lock hash the labels will carry; $2: the modules to import.
# A plain `docker build` takes the labels' values from the Dockerfile's rendered defaults: a lock
# changed since `seat render` would be labelled with another lock's hash, so that fails here.
set -eu
sum=$(sha256sum /opt/seatkit/overlay.lock)
if [ "${sum%% *}" != "$1" ]; then
  echo "seatkit: overlay/overlay.lock hashes to ${sum%% *}, the labels say $1" >&2
  echo "seatkit: run \`seat render\` (the Dockerfile's defaults follow the lock) and build again" >&2
  exit 1
fi
# /opt/seatkit/copied lists what `seat build` copied; a plain build copies every locked file. The
# base's bytecode of each goes before the smoke imports, or they would run it.
if [ ! -f /opt/seatkit/copied ]; then
  grep -v '^#' /opt/seatkit/overlay.lock | while read -r _ path; do echo "$SEAT_OVERLAY_DIR/$path"; done >/opt/seatkit/copied
fi
/opt/seatkit/drop-bytecode.sh /opt/seatkit/copied
rm /opt/seatkit/copied
/opt/seatkit/overlay-check.sh
/opt/seatkit/smoke.sh "$2"
# The smoke imports leave torch's compile-cache folder behind: the image keeps nothing the base lacks
# beyond the overlay and the kit's files.
rm -rf /tmp/torchinductor_*
