# Two entry points, both from a fresh clone: `make demo` and `make test`; `make install` puts
# `seat` on the PATH.
VENV := .venv
PY := python3
# Where `make install` links `seat`: the user's own bin folder, as pipx does (no root, no system pip).
BINDIR ?= $(HOME)/.local/bin

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -U pip
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[test]'
	touch $@

.PHONY: demo test install uninstall
demo: $(VENV)/.installed
	$(VENV)/bin/seat demo

test: $(VENV)/.installed
	$(VENV)/bin/python -m pytest

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
