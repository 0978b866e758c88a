# Quick start: `make report` (the default suite) and `make test` (the tests).
# Both create .venv from the project's own files first.
VENV ?= .venv
BIN := $(VENV)/bin
# Every core this machine lets make use (`nproc`: the CPU affinity's, as in a container
# or under taskset); 1 where nproc is missing.
CORES ?= $(shell nproc 2>/dev/null || echo 1)

# The fast tier: every test that starts no other program (tests/conftest.py fails a test
# that starts one without saying so by a marker).
FAST := not e2e and not tool and not browser and not slurm and not quiet
# Two pytest workers (pytest-xdist), a test file each at a time (--dist loadfile: a file's
# module fixtures, e.g. one snakemake run several tests read, run once): on 2 cores the
# end-to-end tests overlap their waits (timeouts, process starts) with each other's work.
# Files start costliest first (tests/conftest.py, tests/file_costs.json);
# --no-loadscope-reorder keeps that order: pytest-xdist would otherwise start the files
# with the most tests first, leaving the few-test, minutes-long e2e files to run last,
# one worker idle beside them.
WORKERS ?= 2

.PHONY: setup report check test gpu perf docs clean

setup: $(VENV)/.installed

# pip reads constraints.txt: torch stays the CPU build, the rest at tested versions.
$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# compat: the checkout itself on sys.path, where Snakemake's plugin discovery
	# (pkgutil.iter_modules) finds snakemake_logger_plugin_benchflow; it does not see a
	# package behind setuptools' default editable import hook.
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,minilm,slurm,clickhouse,docs]' \
		--config-settings editable_mode=compat
	# The history's change points (otava.analysis: numpy and scipy only); --no-deps because
	# its metadata pins numpy 2.2 for integrations benchflow does not use (pyproject.toml).
	$(BIN)/pip install --quiet --no-deps -c constraints.txt apache-otava
	touch $@

# benchflow's logger (a line per finished case, an ETA, a summary at the end) comes from
# the workflow profile, profiles/default/; FORMAT=quiet or FORMAT=json for CI.
FORMAT ?= text
report: setup
	$(BIN)/snakemake --cores $(CORES) --logger-benchflow-format $(FORMAT) all

# A change's first check, at most a minute on 2 cores: lint, the DAG's lint, the fast tier
# less its `slow` tests (a second or more each: a transformers model, a report's plots, a
# chdb history store, a statistical simulation; `make test` runs them).
check: setup
	$(BIN)/ruff check .
	$(BIN)/snakemake --lint
	BENCHFLOW_FUZZ_EXAMPLES=30 $(BIN)/pytest -q -n $(WORKERS) -m "$(FAST) and not slow"

# The tests keep the checkout's bytecode cache even where the environment says
# PYTHONDONTWRITEBYTECODE (this project's machines do): without it each pytest worker
# rewrites and compiles every test module's asserts again (15 s of make check's minute),
# and each of the thousand-odd Python processes a test run starts (Snakemake, its jobs,
# workers) compiles workflow/ again (0.1-0.3 s each). __pycache__ is ignored by git.
check test: export PYTHONDONTWRITEBYTECODE :=

# The parallel tier includes the SLURM tests (they start a real single-node SLURM,
# tests/slurm/: root and apt; skipped with the reason elsewhere), which wait on the
# scheduler most of their minute: beside the other worker's files, not after them. Only
# a marker expression that names `slurm` selects them (tests/test_slurm.py). It names no
# `slow`: the tests `make check` leaves out run here.
test: setup
	$(BIN)/ruff check .
	$(BIN)/snakemake --lint
	$(BIN)/pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=40 \
		-m "not quiet or slurm"
	$(BIN)/pytest -q -m quiet --durations=5

# The GPU tier (tests/gpu): the H100 suites end to end on this machine's CUDA GPU, each
# median checked against a standalone run. Its tests are skipped, with the reason (-rs),
# where the GPU, IREE's CUDA HAL or a CUDA build of torch is missing: setup installs
# the CPU torch, so a GPU machine needs CUDA torch in $(VENV) for the torch suite.
gpu: setup
	$(BIN)/pytest -q -rs -m gpu tests/gpu

perf: setup
	$(BIN)/python tests/perf/dag_overhead.py

# The user guide (docs/, mkdocs.yml) as a static site in site/: open site/index.html.
# --strict: a broken link or anchor fails the build (tests/test_docs_site.py runs it too).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf results logs .snakemake
