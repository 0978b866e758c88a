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
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

report: setup
	$(BIN)/snakemake --cores $(CORES) results/report.json

test: setup
	$(BIN)/ruff check .
	$(BIN)/pytest -q

perf: setup
	$(BIN)/python tests/perf/dag_overhead.py

clean:
	rm -rf results logs .snakemake
