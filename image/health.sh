#!/bin/sh
# Healthy when the server answers /health where it listens now: SEAT_HOST and SEAT_PORT come from the
# launch (seat up, the script, compose pass them), the image's values being only defaults.
host=${SEAT_HOST:-127.0.0.1}
case "$host" in 0.0.0.0|::|"[::]") host=127.0.0.1 ;; esac
url="http://$host:${SEAT_PORT:-8000}/health"
if command -v curl >/dev/null 2>&1; then
  exec curl -fsS -o /dev/null "$url"
fi
exec wget -q -O /dev/null "$url"
