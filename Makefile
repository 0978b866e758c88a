# Quick start: `make report` (the default suite) and `make test` (the tests).
# Both create .venv from the project's own files first.
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 8

.PHONY: setup report test perf clean

setup: $(VENV)/.installed

# pip reads constraints.txt: torch stays the CPU build, the rest at tested versions.
$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,minilm,slurm]'
	touch $@

report: setup
	$(BIN)/snakemake --cores $(CORES) all

# The second pytest starts a real single-node SLURM (tests/slurm/): it needs root and apt,
# and is skipped with its reason elsewhere.
test: setup
	$(BIN)/ruff check .
	$(BIN)/snakemake --lint
	$(BIN)/pytest -q
	$(BIN)/pytest -q -m slurm

perf: setup
	$(BIN)/python tests/perf/dag_overhead.py

clean:
	rm -rf results logs .snakemake
