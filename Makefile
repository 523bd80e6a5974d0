# Two entry points, both from a fresh clone: `make demo` and `make test`; `make install` puts
# `seat` on the PATH. `make lint` and `make unit` are the quick loop while developing.
VENV := .venv
PY := python3
# Workers for the unit tier (pytest-xdist); `make unit JOBS=1` runs it in one process.
JOBS ?= auto
# Where `make install` links `seat`: the user's own bin folder, as pipx does (no root, no system pip).
BINDIR ?= $(HOME)/.local/bin

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -U pip
	@# setuptools' note on every editable install ("Editable installation ... folders with the same
	@# name as your package") is for src-less layouts in general: this clone has no such folder.
	PYTHONWARNINGS='ignore:Editable installation' $(VENV)/bin/pip install -q --disable-pip-version-check -e '.[test]'
	touch $@

.PHONY: demo test unit integration lint install uninstall
demo: $(VENV)/.installed
	$(VENV)/bin/seat demo

# The unit tier in parallel; the integration tier in one process: its session fixtures (this run's
# docker engine, the shared runtimes and images in ~/.cache/seatkit) are made once per run, and a
# worker each would start an engine each and build the same caches at once. It prints its slowest
# fifteen, so that a CI log says where the time went.
test: unit integration

unit: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -n $(JOBS) tests/unit

integration: $(VENV)/.installed
	$(VENV)/bin/python -m pytest --durations=15 tests/integration

# The code checks configured in pyproject.toml: lint, format, types, the layer contract.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check seatkit tests
	$(VENV)/bin/ruff format --check seatkit tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# A link to this clone's seat: the kit reads its profiles and data from the clone, so it stays here.
install: $(VENV)/.installed
	mkdir -p "$(BINDIR)"
	@# -L too: a dangling link (another install's venv, since removed) is still someone else's
	@if { [ -e "$(BINDIR)/seat" ] || [ -L "$(BINDIR)/seat" ]; } && [ "$$(readlink "$(BINDIR)/seat")" != "$(CURDIR)/$(VENV)/bin/seat" ]; then \
	  echo "$(BINDIR)/seat exists and is not this clone's: left alone (remove it, or make install BINDIR=DIR)"; exit 1; fi
	ln -sfn "$(CURDIR)/$(VENV)/bin/seat" "$(BINDIR)/seat"
	@echo "seat -> $(CURDIR)/$(VENV)/bin/seat, linked in $(BINDIR)"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "$(BINDIR) is not on your PATH: add it (e.g. in ~/.profile: export PATH=\"$(BINDIR):\$$PATH\")";; esac

uninstall:
	@if [ "$$(readlink "$(BINDIR)/seat")" = "$(CURDIR)/$(VENV)/bin/seat" ]; then rm "$(BINDIR)/seat"; echo "removed $(BINDIR)/seat"; \
	elif [ -e "$(BINDIR)/seat" ] || [ -L "$(BINDIR)/seat" ]; then echo "$(BINDIR)/seat is not this clone's link: left alone"; \
	else echo "nothing to remove: no seat in $(BINDIR)"; fi
