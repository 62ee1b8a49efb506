# Every target installs what it needs into .venv first, so a fresh clone works.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The broker does not exist yet: until it does, `make run` exercises the storage engine
# with a short benchmark in ./data (see README).
run: $(STAMP)
	@echo "pocketmq: the broker is not built yet; running the storage engine benchmark into ./data"
	$(BIN)/pocketmq store bench --dir ./data/store-bench --count 200000 --size 1024 --flush async

test: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not crash"

bench: $(STAMP)
	$(BIN)/python bench/store_bench.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist src/*.egg-info
