# Two entry points, both from a fresh clone: `make demo` and `make test`.
VENV := .venv
PY := python3

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -U pip
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[test]'
	touch $@

.PHONY: demo test
demo: $(VENV)/.installed
	$(VENV)/bin/seat demo

test: $(VENV)/.installed
	$(VENV)/bin/python -m pytest
