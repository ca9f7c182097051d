# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
# Each creates .venv when missing, installs torch/torchvision first (so pip never reaches for a
# different build), then the package with its extras; both are idempotent.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_PINS ?= torch==2.14.1 torchvision==0.29.1
STAMP := $(VENV)/.lightning-async-hpo-installed

.PHONY: install bytecode demo test bench bench-full lint clean

install: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# The distribution is lightning-async-hpo (import name lightning_hpo). An install under the old
# name lightning-hpo, or the unrelated project of that name (same import name), is removed first.
# scripts/check_space.py refuses in one line, before pip writes anything, where torch cannot fit.
$(STAMP): pyproject.toml | $(PY)
	$(PY) scripts/check_space.py $(VENV)
	$(PY) -m pip install $(TORCH_PINS)
	$(PY) -m pip uninstall -y lightning-hpo
	$(PY) -m pip install -e '.[dev]'
	touch $(STAMP)

# The package's modules as bytecode, as pip writes them for an installed (not editable) package.
# Where PYTHONDONTWRITEBYTECODE is set (CI images, many containers) Python would otherwise compile
# them again in every process: about 0.2 s of CPU for the launcher and 0.1 s for each worker,
# before the first trial. Quick when they are up to date; a stale file is only recompiled in
# memory. Only a speed-up: where the folder cannot be written, the command goes on without it.
bytecode: $(STAMP)
	@$(PY) -m compileall -q lightning_hpo >/dev/null 2>&1 || echo "note: could not write lightning_hpo's bytecode; every process will compile it"

demo: bytecode
	$(PY) -m lightning_hpo.launch

# The whole suite and the package's docstring examples (pyproject.toml: --doctest-modules), in two
# pytest processes at once: the tests that depend on timing, and the rest beside them at nice 10
# (scripts/run_tests.py).
test: bytecode
	bash scripts/ensure_postgres.sh
	bash scripts/ensure_slurm.sh
	$(PY) scripts/run_tests.py

# One table of the overheads (~5 min on 2 cores); bench-full adds scaling, search, pause/resume, schedules,
# the launcher against a plain Optuna script (bench_peers.py) and several objectives
# (bench_multiobjective.py) (~50 min).
bench: bytecode
	$(PY) benchmarks/run_all.py

bench-full: bytecode
	$(PY) benchmarks/run_all.py --full

lint: $(STAMP)
	$(PY) -m ruff check lightning_hpo tests benchmarks examples scripts
	$(PY) -m mypy lightning_hpo

clean:
	rm -rf $(VENV) runs .pytest_cache
