"""The real-tool root's kill sweep in full (tests/integration/test_host_real_tools.py): apply
SIGKILLed inside update-grub and update-initramfs, then at 6 seeded points, each followed by
recover, on a Debian root with its real boot tools; each must end pristine. CI kills at one seeded
point. Prints the figures and what failed; exits 1 on any failure.
Usage (root, mmdebstrap: the Debian root is made in a chroot):
    .venv/bin/python tests/benchmarks/real_tool_kills.py
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [
    str(Path(__file__).resolve().parents[1]),
    str(Path(__file__).resolve().parents[1] / "integration"),
]

from debian_root import make  # noqa: E402
from test_host_real_tools import host, real_tool_kills  # noqa: E402

SEEDED = 6


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        base, where = make(Path(tmp) / "base"), Path(tmp) / "host"
        where.mkdir()
        cases, failures = real_tool_kills(host(base, where), seeded=SEEDED)
    print(
        f"real-tool root: {len(cases)} SIGKILLs (2 inside the real tools); {time.monotonic() - started:.0f} s"
    )
    for case in failures:
        print(f"  FAIL killed at {case}")
    print("PASS" if not failures else "FAIL")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
