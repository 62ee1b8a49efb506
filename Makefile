# Every target installs what it needs into .venv first, so a fresh clone works.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Python caches compiled modules (__pycache__, gitignored) and pytest its assertion-rewritten
# test files; an environment that forbids it makes every process compile what it imports: a
# `pocketmq serve` took 0.58 s of imports instead of 0.34, and each pytest worker 8.2 s to
# collect the suite instead of 2.4 (tests/unit at -n 2: 34 s, then 25).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-fast bench lint proto clean native-check native-fuzz

# The editable install also compiles the C extension (setup.py), so its sources count too.
$(STAMP): pyproject.toml setup.py $(wildcard src/pocketmq/_native/*)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# NameServer (9876) + broker (10911) + gRPC endpoint for 5.x clients (8081) in one process,
# store in ./data/store; Ctrl-C stops it cleanly.
run: $(STAMP)
	$(BIN)/pocketmq serve --store ./data/store

# The extension is optional for `pip install`, not here: its protocol and store unit tests and
# the fuzz tests run under ASan + UBSan first (1.5 min; native-check adds valgrind), the whole
# suite against it next, then the unit, fuzz, crash and integration tests again on the
# pure-Python references (the servers they start inherit POCKETMQ_PURE_PYTHON;
# test_implementation.py checks). Run once: interop, Spark, the test_native_* comparisons (they
# call the C function and its reference side by side, whatever the variable says), and the
# ZooKeeper failover and dashboard tests (no native code of their own; the data path under them
# is the rest of the second run's). Each run is two pytest-xdist processes, a test file to each
# at a time (module fixtures start their servers once): half of one process's time was waiting
# on servers, JVMs and disks. On 2 cores: 5.8 min, then 2 min (15.5 and 6 in one process, before
# bytecode caches). The failover tests run a real ZooKeeper, Debian's zookeeper package,
# installed when missing (they are skipped if that fails); the dashboard's end-to-end test
# drives Debian's chromium, installed the same way.
SUITE := $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15
test: $(STAMP)
	test -x /usr/share/zookeeper/bin/zkServer.sh \
		|| { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper; } \
		|| echo "zookeeper could not be installed: the failover tests will be skipped"
	test -x /usr/bin/chromium \
		|| { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
		|| echo "chromium could not be installed: the dashboard's browser tests will be skipped"
	$(BIN)/python -m pocketmq.cli --version | grep -q native \
		|| { echo "pocketmq._speedups did not build (see pip's output)"; exit 1; }
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy
	CHECKS=asan PYTHON=$(BIN)/python bench/native_check.sh
	$(SUITE)
	POCKETMQ_PURE_PYTHON=1 $(SUITE) tests/unit tests/fuzz tests/crash \
		tests/integration --ignore-glob='tests/unit/*/test_native_*.py' \
		--ignore=tests/integration/failover --ignore=tests/integration/test_dashboard.py

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not crash"

# The client benchmark compares with Redis Streams: Debian's redis-server, installed when missing.
BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server; }
	$(BIN)/python bench/store_bench.py
	$(BIN)/python bench/sync_cost.py
	$(BIN)/python bench/native_bench.py
	$(BIN)/python bench/client_bench.py
	$(BIN)/python bench/remoting_floor.py
	$(BIN)/python bench/send_handler_bench.py
	$(BIN)/python bench/send_handler_bench.py --flush sync
	$(BIN)/python bench/w2_bench.py
	$(BIN)/python bench/grpc_bench.py
	$(BIN)/python bench/grpc_floor.py --client-metadata
	$(BIN)/python bench/grpc_handlers.py
	$(BIN)/python bench/delay_bench.py
	$(BIN)/python bench/sql_filter_bench.py
	$(BIN)/python bench/transaction_bench.py
	$(BIN)/python bench/ha_bench.py
	$(BIN)/python bench/failover_bench.py
	$(BIN)/python bench/spark_bench.py
	$(BIN)/python bench/fuzz_edges.py
	$(BIN)/python bench/peers_bench.py

# Regenerate the gRPC code (apache.rocketmq.v2) from our .proto files; the output is committed.
PROTO_DIR := src/pocketmq/grpc/protos
PROTO_OUT := src/pocketmq/grpc/v2
proto: $(STAMP)
	rm -f $(PROTO_OUT)/*_pb2.py $(PROTO_OUT)/*_pb2.pyi $(PROTO_OUT)/*_pb2_grpc.py
	$(BIN)/python -m grpc_tools.protoc -I $(PROTO_DIR) --python_out=$(PROTO_OUT) \
		--pyi_out=$(PROTO_OUT) --grpc_python_out=$(PROTO_OUT) \
		$(PROTO_DIR)/definition.proto $(PROTO_DIR)/service.proto
	# protoc imports sibling modules as top-level ones; they live in our package.
	sed -i -E 's/^import (definition|service)_pb2 as/from pocketmq.grpc.v2 import \1_pb2 as/' \
		$(PROTO_OUT)/*.py $(PROTO_OUT)/*.pyi
	# definition.proto declares no service, so its _grpc module would be empty.
	rm -f $(PROTO_OUT)/definition_pb2_grpc.py

# The extension's tests under ASan + UBSan, then valgrind (minutes; not part of `make test`).
native-check: $(STAMP)
	command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
	PYTHON=$(BIN)/python bench/native_check.sh

# The extension against its references under libFuzzer (clang; its sanitizer runtimes are the
# libclang-rt package, which clang only recommends). FUZZ_SECONDS: how long (default 120).
native-fuzz: $(STAMP)
	command -v clang >/dev/null && ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 \
		|| { apt-get update -qq && apt-get install -y -qq clang libclang-rt-dev; }
	PYTHON=$(BIN)/python bench/fuzz/fuzz_native.sh $(or $(FUZZ_SECONDS),120)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist src/*.egg-info src/pocketmq/_speedups*.so
