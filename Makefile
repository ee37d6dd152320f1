# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv if missing and (re)install the package when pyproject changes.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Test processes (pytest-xdist; whole files per process). Most of the suite's
# time is single-threaded XLA compilation, so two processes on the 2-core CI
# machine share the work (CI: 41 min on 2 cores, 2026-11-27, against a
# 15-minute budget; where the time goes: docs/architecture.md, "The test
# suite's time"; each keeps a compilation cache for the subprocesses its
# tests start, tests/conftest.py). `make test TEST_WORKERS=8` on more cores.
TEST_WORKERS ?= 2

.PHONY: demo test docs lint bench bench-science orc04-suite dist check-dist check-native clean

# the native kernels are compiled by the install: reinstall when they change
$(STAMP): pyproject.toml CMakeLists.txt $(wildcard src/orc/_native/*.cc src/orc/_native/*.h)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/orc demo

test: $(STAMP)
	$(VENV)/bin/orc info
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: $(STAMP)
	$(PY) benchmarks/run.py $(BENCH_ARGS)
	$(PY) benchmarks/streaming.py

# Science benchmarks (benchmarks/science/README.md): the classification
# benchmark against aeon's MiniRocket, in its own venv with aeon
# (benchmarks/.venvs/science, created on first use), then the dysts
# forecasting panel (benchmarks/science/DYSTS.md; creates
# benchmarks/.venvs/{dysts,orc04,rpy} on first use). Full panel: hours on 2
# cores; `make bench-science DYSTS_ARGS=--quick` is a ~1-minute smoke run.
SCIENCE_PY := benchmarks/.venvs/science/bin/python
DYSTS_ARGS ?= --flows all --seeds 3
CLASSIFICATION_ARGS ?=
$(SCIENCE_PY):
	python3 -m venv benchmarks/.venvs/science
	$(SCIENCE_PY) -m pip install --quiet --upgrade pip
	$(SCIENCE_PY) -m pip install --quiet -e ".[science]"

bench-science: $(STAMP) $(SCIENCE_PY)
	$(SCIENCE_PY) benchmarks/science/classification.py $(CLASSIFICATION_ARGS)
	$(PY) benchmarks/science/dysts_panel.py $(DYSTS_ARGS)

# ORC 0.4's own test suite and example notebooks, from its source
# distribution (PyPI, downloaded once into benchmarks/.cache), run unchanged
# on orc, the notebooks beside ORC 0.4 itself (benchmarks/.venvs/orc04);
# writes benchmarks/ORC04_SUITE.md. About 10 minutes on 2 cores.
orc04-suite: $(STAMP)
	$(PY) benchmarks/orc04_suite.py $(ORC04_SUITE_ARGS)

# sdist and wheel (the wheel holds the compiled kernels), then the wheel
# installed into a fresh virtual environment must import with them on
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --outdir dist .

check-dist: dist
	rm -rf build/dist-venv
	$(PYTHON) -m venv build/dist-venv
	build/dist-venv/bin/pip install --quiet dist/*.whl
	cd build && dist-venv/bin/python -c "import orc, orc._native as n; \
	c = n.native_config(); assert c['available'], c; print('wheel OK:', c['file'])"

# C++ tests of the native kernels (tests/native) under AddressSanitizer +
# UndefinedBehaviorSanitizer, then ThreadSanitizer, then built for a CPU
# without AVX2 (-march=x86-64, only the portable loops); cmake/ninja from PyPI
# into the venv where the system has none
SANITIZERS := address,undefined thread
check-native: $(STAMP)
	command -v cmake >/dev/null && command -v ninja >/dev/null || \
	  $(PY) -m pip install --quiet "cmake>=3.18" ninja
	set -e; mkdir -p build; export PATH="$(abspath $(VENV))/bin:$$PATH"; \
	for san in $(SANITIZERS); do \
	  dir=build/native-tests-$$(echo $$san | tr , -); \
	  cmake -S . -B $$dir -G Ninja -DORC_NATIVE_TESTS=ON -DORC_SANITIZE=$$san \
	    -DPython_EXECUTABLE=$(abspath $(PY)) > $$dir.log 2>&1 || { cat $$dir.log; exit 1; }; \
	  cmake --build $$dir --target orc_native_tests >> $$dir.log 2>&1 || { cat $$dir.log; exit 1; }; \
	  echo "== C++ kernel tests, -fsanitize=$$san"; \
	  $$dir/orc_native_tests; \
	done; \
	dir=build/native-tests-generic; \
	arch=$$([ "$$(uname -m)" = x86_64 ] && echo "-march=x86-64"); \
	cmake -S . -B $$dir -G Ninja -DORC_NATIVE_TESTS=ON -DORC_SANITIZE= \
	  -DCMAKE_CXX_FLAGS="$$arch -DORC_NO_CLONES" \
	  -DPython_EXECUTABLE=$(abspath $(PY)) > $$dir.log 2>&1 || { cat $$dir.log; exit 1; }; \
	cmake --build $$dir --target orc_native_tests >> $$dir.log 2>&1 || { cat $$dir.log; exit 1; }; \
	echo "== C++ kernel tests, portable build ($${arch:-native arch}, no per-function SIMD targets)"; \
	$$dir/orc_native_tests

lint: $(STAMP)
	$(VENV)/bin/ruff check --fix src tests benchmarks examples
	$(VENV)/bin/ruff format src tests benchmarks examples

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .pytest_cache
