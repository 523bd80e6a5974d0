"""The seat's API key: one file per profile under SEAT_HOME, and no exposure without it.

vLLM treats an empty key as no key at all, so a key file that holds only whitespace is refused,
never passed on. The same rules are in the rendered script (serve.sh.j2).
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from seatkit.errors import SeatError

EXPOSE_WITHOUT_KEY = "SEAT_EXPOSE_WITHOUT_KEY"
# Loopback as the script tests it too (a bash regex): anything else counts as exposed.
LOOPBACK = re.compile(r"127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|::1|localhost")
_KEY = re.compile(r"[\x21-\x7e]+")  # a bearer token: printable, no spaces


def shell_key_file(profile: str) -> str:
    """The profile's key file (layout.keys) as a bash expression, following SEAT_HOME alike."""
    return f"${{SEAT_HOME:-${{XDG_CACHE_HOME:-$HOME/.cache}}/seatkit}}/keys/{profile}"


def read(path: Path | str) -> str:
    """The key in the file; refuses a missing, empty or whitespace-only file."""
    hint = "seat up makes one; or point SEAT_API_KEY_FILE at yours"
    try:
        key = Path(path).read_bytes().decode().rstrip("\n")  # as bash $(<file): no \r or space trimmed
    except OSError as exc:
        raise SeatError(f"cannot read the API key file {path}: {exc.strerror}", hint) from None
    except UnicodeDecodeError:
        raise SeatError(f"the API key file {path} is not text", hint) from None
    if not _KEY.fullmatch(key):
        raise SeatError(
            f"the API key file {path} holds no usable key (empty, or spaces inside): "
            "vLLM would serve without authentication",
            "delete the file and let `seat up` make a new key, or write one in it",
        )
    return key


def ensure(path: Path) -> Path:
    """A key file readable by its owner alone; made once, never printed. A file the operator
    points at is never chmod-ed (it may link to anything): one others can read is refused."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
    read(path)
    if os.stat(path).st_mode & 0o077:
        raise SeatError(
            f"the API key file {path} is open to other users (group or world bits set)", f"chmod 600 {path}"
        )
    return path


# One wording for every launch form: `seat up`, the script and compose's exposure check.
REFUSAL = "refusing to serve on {host} without an API key"
REFUSAL_HINT = f"set server.api_key: true, bind 127.0.0.1, or set {EXPOSE_WITHOUT_KEY}=1"


def refuse_exposure(host: str, keyed: bool, environ=os.environ) -> None:
    """A seat without a key binds loopback only, unless the operator says otherwise."""
    if keyed or LOOPBACK.fullmatch(host) or environ.get(EXPOSE_WITHOUT_KEY) == "1":
        return
    raise SeatError(
        REFUSAL.format(host=host) + ": anyone who reaches it could use the seat",
        REFUSAL_HINT + " to expose it without a key on purpose",
    )
