# kosumi: `make demo` runs the main job on the embedded default; `make test` runs the tests.
# Both create .venv and install what they need on first use.

VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# the CPU build of torch lies on this machine's disk; a range it satisfies installs nothing more
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[all,dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m kosumi.demo

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) benchmarks/engine_speed.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info src/kosumi/*.so
