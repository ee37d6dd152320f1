# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv if missing and (re)install the package when pyproject changes.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/orc demo

test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/run.py $(BENCH_ARGS)
	$(PY) benchmarks/streaming.py

lint: $(STAMP)
	$(VENV)/bin/ruff check --fix src tests benchmarks examples
	$(VENV)/bin/ruff format src tests benchmarks examples

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
