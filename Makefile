# From a fresh clone: `make demo` or `make test`. Everything lands in .venv and build/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.opsdk-installed

.PHONY: all setup build generate demo test bench clean api-docs

all: test

# Exact versions from constraints.txt (pyproject.toml has the ranges); torch's CPU wheel and jax
# for the framework tests. setuptools first, so the editable install needs no isolated build env.
$(STAMP): pyproject.toml constraints.txt setup.py opsdk/runtime/kernels/_fusedcall.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt setuptools wheel
	$(BIN)/python -m pip install -q -c constraints.txt --no-build-isolation -e '.[test,torch,jax,docs,gpu,dist]'
	$(BIN)/python -m compileall -q opsdk opdefs >/dev/null  # fast CLI start even where bytecode writing is off
	touch $(STAMP)

setup: $(STAMP)

generate: setup
	$(BIN)/opsdk generate

build: setup
	$(BIN)/opsdk build

demo: build
	$(BIN)/python examples/demo.py
	$(BIN)/python examples/dist_softmax.py --steps 50

# Two pytest-xdist workers (TEST_WORKERS=N for more, 0 for one process): the suite waits on
# compilers and subprocesses for much of its time, and one process kept 2 cores about 60 % busy.
# Each test file stays on one worker, and so do tests/dist and tests/packaging (tests/conftest.py).
TEST_WORKERS ?= 2
test: build
	$(BIN)/opsdk generate --check
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -q --durations=30 -n $(TEST_WORKERS) --dist loadgroup

# The alternatives (PyTorch, TensorFlow, SciPy) are installed for benchmarks only; every script
# in bench/ runs, and bench/results/ gets results.md and results.json (bench/README.md).
# BENCH_ARGS=--quick for each script's quick mode.
# The alternatives are installed once per change of the declared versions (a stamp, like setup's).
BENCH_STAMP := $(VENV)/.opsdk-bench-installed
$(BENCH_STAMP): $(STAMP) pyproject.toml constraints.txt
	$(BIN)/python -m pip install -q -c constraints.txt --no-build-isolation -e '.[test,bench]'
	touch $(BENCH_STAMP)

bench: build $(BENCH_STAMP)
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

# The API reference from the docstrings (docs/api/README.md); a pdoc warning (a module that is
# gone, a docstring it cannot read) fails the build.
API_MODULES := opsdk opsdk.torch opsdk.jax opsdk.runtime.kernels.interop opsdk.registry
api-docs: setup
	$(BIN)/python -W error -m pdoc -o docs/api/html --no-search $(API_MODULES)

clean:
	rm -rf build .pytest_cache .hypothesis
