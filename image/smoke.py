"""Import the modules the seat needs; on failure name each one and why, and exit 1."""

import importlib
import sys

failed = []
modules = sys.argv[1].split()
for name in modules:
    try:
        importlib.import_module(name)
    except Exception as exc:  # an import can fail with anything its module raises
        failed.append(f"  {name}: {type(exc).__name__}: {exc}")
if failed:
    print("seatkit smoke test: the image cannot import what the seat needs; the base image lacks "
          "something the overlay depends on:", *failed, sep="\n", file=sys.stderr)
    sys.exit(1)
print(f"seatkit smoke test: imported {' '.join(modules)}")
