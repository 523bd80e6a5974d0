#!/usr/bin/env bash
# A stand-in for the vLLM image's layout, made without any registry: Debian (mmdebstrap,
# essential) with a venv at /opt/venv whose lib/python3.12/site-packages is on sys.path.
# The interpreter is this machine's CPython 3.12 when there is one, else Debian's python3 with a
# real lib/python3.12/site-packages on its path. Usage: py312-base.sh TAG
set -euo pipefail
tag=$1
mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n 1 || true)
[ -n "$mirror" ] || mirror=$(grep -h '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -n 1)
[ -n "$mirror" ] || { echo "no apt mirror configured" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
home=
for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
  home=$("$candidate" -c 'import sys; print(sys.base_prefix)' 2>/dev/null) && break
done
if [ -n "$home" ] && [ -x "$home/bin/python3.12" ]; then
  tar -C / -c --exclude='__pycache__' --exclude="${home#/}/lib/python3.12/test" \
    --exclude="${home#/}/lib/python3.12/site-packages/*" --exclude="${home#/}/lib/python3.12/config-3.12-*" \
    --exclude="${home#/}/lib/python3.12/idlelib" --exclude="${home#/}/lib/python3.12/tkinter" \
    "${home#/}" > "$stage/python.tar"
  include=libssl3,libffi8,libsqlite3-0,liblzma5,libbz2-1.0,zlib1g,libreadline8
  unpack="tar -C \"\$1\" -x -f $stage/python.tar"
  venv="chroot \"\$1\" $home/bin/python3.12 -m venv --without-pip /opt/venv"
else
  include=python3
  unpack=true
  # a real python3.12/site-packages folder, put on the 3.11 venv's path by a .pth file
  venv="chroot \"\$1\" /usr/bin/python3 -m venv --without-pip /opt/venv && mkdir -p \"\$1\"/opt/venv/lib/python3.12/site-packages && echo /opt/venv/lib/python3.12/site-packages > \"\$(ls -d \"\$1\"/opt/venv/lib/python3.1[01])\"/site-packages/py312.pth"
fi
# shellcheck disable=SC2016  # "$1" in the hooks is mmdebstrap's root, expanded there
mmdebstrap --variant=essential --include="$include" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook="$unpack" --customize-hook="$venv" \
  --customize-hook='rm -f "$1"/etc/apt/sources.list "$1"/etc/apt/sources.list.d/*' \
  bookworm - "$mirror" 2>"$stage/log" \
| docker import -c 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV VIRTUAL_ENV=/opt/venv' - "$tag" >/dev/null \
|| { tail -n 20 "$stage/log" >&2; exit 1; }
