#!/bin/sh
# Healthy when the server answers /health on its port (curl in the vLLM image, wget in busybox).
url="http://127.0.0.1:${SEAT_PORT:-8000}/health"
if command -v curl >/dev/null 2>&1; then
  exec curl -fsS -o /dev/null "$url"
fi
exec wget -q -O /dev/null "$url"
