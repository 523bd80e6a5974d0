#!/bin/sh
# Healthy when the server answers /health where it listens now: SEAT_HOST and SEAT_PORT come from the
# launch (seat up, the script, compose pass them), the image's values being only defaults.
host=${SEAT_HOST:-127.0.0.1}
case "$host" in
  0.0.0.0|::|"[::]") host=127.0.0.1 ;;  # every address: the loopback (dual-stack takes IPv4 on ::)
  \[*) ;;
  *:*) host="[$host]" ;;  # an IPv6 address goes in brackets in a URL
esac
url="http://$host:${SEAT_PORT:-8000}/health"
if command -v curl >/dev/null 2>&1; then
  exec curl -fsS -o /dev/null "$url"
fi
exec wget -q -O /dev/null "$url"
