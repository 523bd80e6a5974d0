#!/bin/sh
# Run once at build time, before anything imports. $1: a file listing each file the overlay copied,
# one path a line. The base's own bytecode of such a file is stale, yet Python runs it instead of
# the new source when it is unchecked-hash, or when its recorded time and size match the copy's
# (seat build gives every file one fixed time): remove it.
set -eu
while read -r path; do
  case "$path" in *.py) ;; *) continue ;; esac
  stem=${path##*/}
  rm -f "${path%/*}/__pycache__/${stem%.py}".*.pyc
done <"$1"
