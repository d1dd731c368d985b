# Everything a fresh machine needs: `make run` serves, `make test` checks. CI runs `make test`.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One venv, two installs, each redone whenever pyproject.toml changes: STAMP is the package
# with the `compile` extra (what serving needs, as `pip install shardq`, plus Cython to build
# the compiled modules: `make compiled`), TEST_STAMP adds the `test` and `pipeline` extras
# (pytest, ruff, mypy, pyspark) for `make test`.
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# The editable install as a plain path in a .pth file ("compat"), not setuptools' import
# hook: the hook imports pathlib, re and urllib.parse when Python starts, before `shardqd`
# can bind its port (≈ 12 ms of the ≈ 35 ms to the bind, docs/BENCHMARKS.md "Start-up"). A
# venv installed with the hook is installed again (its finder module is the mark).
EDITABLE := --config-settings editable_mode=compat
EDITABLE_MARK := $(if $(wildcard $(VENV)/lib/python*/site-packages/__editable___shardq_*_finder.py),.FORCE)
PYTEST_ARGS ?=

.PHONY: .FORCE run test test-pure lint fmt venv test-venv bytecode compiled beanstalkd java strace chromium clients php ruby node node-runtime bunqueue clean

run: venv bytecode compiled
	$(BIN)/shardq serve --config config/shardq.yaml

# Phase 1: lint, format check and type check (mypy: [tool.mypy] in pyproject.toml), then
# the whole suite except Spark, in parallel.
# Phase 2: the Spark pipeline tests (tests/pipeline) in ONE process: one JVM, no xdist.
# Phase 3: the pure build (no compiled module, SHARDQ_PURE=1: shardq/compiled.py) through
# what the compiled build must not change: the differential suite against beanstalkd, the
# client matrix, the invariant checker, the concurrency and crash tests (every layout), and
# the check of which build ran.
test: test-venv bytecode compiled beanstalkd java strace chromium clients loadcore bunqueue
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	SHARDQ_BUILD=compiled $(BIN)/pytest -n auto -q -m "not spark" $(PYTEST_ARGS)
	$(BIN)/pytest -q -m spark -p no:xdist $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-pure

PURE_TESTS = tests/differential tests/clients tests/invariants tests/integration/test_concurrency.py \
	tests/integration/test_durability.py tests/integration/test_compiled.py

test-pure: test-venv bytecode beanstalkd clients
	SHARDQ_PURE=1 SHARDQ_BUILD=pure $(BIN)/pytest -n auto -q $(PURE_TESTS) $(PYTEST_ARGS)

venv: $(STAMP)

# Always out of date: what a venv with the import hook depends on (EDITABLE_MARK).
.FORCE:

$(STAMP): pyproject.toml $(EDITABLE_MARK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[compile]' $(EDITABLE)
	touch $(STAMP)

test-venv: $(TEST_STAMP)

# The package's bytecode, written even under PYTHONDONTWRITEBYTECODE (an editable install
# compiles nothing): a server then starts in ≈ 0.11 s instead of ≈ 0.16 s, and every test
# that starts one gains it. Only files changed since the last run are compiled again.
bytecode:
	$(BIN)/python -m compileall -q shardq

# The serving path's modules compiled by Cython (shardq/compiled.py says which and why),
# built in place beside their sources; only what changed is built again.
compiled: venv
	@$(call apt_need,gcc,gcc,gcc)
	$(BIN)/python tools/build_compiled.py

$(TEST_STAMP): pyproject.toml $(EDITABLE_MARK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,pipeline,compile]' $(EDITABLE)
	touch $(STAMP) $(TEST_STAMP)

# $(call apt_need,COMMAND,PACKAGE,NAME): when COMMAND is missing, install PACKAGE with apt-get
# (root only; otherwise say how and fail). The tests that need them never skip under CI.
apt_need = $(call apt_need_test,command -v $(1),$(2),$(3))

# $(call apt_need_test,TEST,PACKAGE,NAME): the same when the shell command TEST fails (for a
# library, which is no command).
define apt_need_test
$(1) >/dev/null 2>&1 || { \
  if [ "$$(id -u)" = 0 ]; then \
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $(2); \
  else \
    echo "make test: $(3) is not installed and we are not root;" \
         "run 'sudo apt-get install -y $(2)' and retry" >&2; \
    exit 1; \
  fi; \
}
endef

# The differential tests compare shardq with the real beanstalkd 1.12.
beanstalkd:
	@$(call apt_need,beanstalkd,beanstalkd,beanstalkd)

# PySpark 4 needs Java 17+ (the Spark tests).
java:
	@$(call apt_need,java,openjdk-17-jre-headless,Java 17)

# A durability test kills a shard at its fsync with strace (tests/integration/test_durability.py).
strace:
	@$(call apt_need,strace,strace,strace)

# The dashboard test (tests/integration/test_dashboard.py) loads the metrics page in Debian's
# headless Chromium.
chromium:
	@$(call apt_need_test,test -x /usr/bin/chromium,chromium,Chromium)

# The client matrix (tests/clients): real clients in other languages against beanstalkd and
# shardq. PHP's pheanstalk and Ruby's beaneater come from Debian; Node's fivebeans from npm,
# pinned by tests/clients/node/package-lock.json into its git-ignored node_modules (`npm ci`
# again only when package.json or the lock file changes, so an installed tree needs no network).
clients: php ruby node

php:
	@$(call apt_need,php,php-cli,PHP)
	@$(call apt_need_test,php -r 'require "Pheanstalk/autoload.php";',php-pda-pheanstalk,pheanstalk)

ruby:
	@$(call apt_need,ruby,ruby,Ruby)
	@$(call apt_need_test,ruby -e 'require "beaneater"',ruby-beaneater,beaneater)

NODE_DIR := tests/clients/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed

node: $(NODE_STAMP)

node-runtime:
	@$(call apt_need,node,nodejs,Node.js)
	@$(call apt_need,npm,npm,npm)

$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json | node-runtime
	cd $(NODE_DIR) && npm ci --prefer-offline --no-audit --no-fund
	touch $@

# The bunqueue tests (tests/integration/test_bunqueue_*.py) run the real bunqueue 2.9.5
# server and its TS SDK under Bun 1.4.5, both from npm, pinned by
# tests/bunqueue/sdk/package-lock.json into its git-ignored node_modules (Bun arrives as an
# npm package; `npm ci` again only when package.json or the lock file changes). Its Python
# SDK, bunqueue-client, is in the `test` extra.
BUNQUEUE_DIR := tests/bunqueue/sdk
BUNQUEUE_STAMP := $(BUNQUEUE_DIR)/node_modules/.installed

bunqueue: $(BUNQUEUE_STAMP)

$(BUNQUEUE_STAMP): $(BUNQUEUE_DIR)/package.json $(BUNQUEUE_DIR)/package-lock.json | node-runtime
	cd $(BUNQUEUE_DIR) && npm ci --prefer-offline --no-audit --no-fund
	touch $@

lint: test-venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt: test-venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache build *.egg-info
	find shardq -name '*.so' -delete

# Performance: the standard matrix against beanstalkd (A), shardq (B) and the stub (L), 3 rounds
# row by row, a fresh server per cell, the load from the compiled core (shardq/bench/loadcore.c);
# then shardq with 1, 2 and 4 serving processes. Rewrites the generated table at the top of
# docs/BENCHMARKS.md (plus docs/benchmarks.png and .json) in one go, and says how long it took.
# Run it on a quiet machine: the table records the load average and every cell's other CPU.
# 1,008 s (17 min) measured on 2 cores busy with other work (2026-11-27).
BENCH_ARGS ?= --rounds 3 --scaling 1,2,4
.PHONY: bench loadcore
bench: venv beanstalkd loadcore
	@start=$$(date +%s); \
	$(BIN)/shardq bench compare --matrix standard $(BENCH_ARGS) \
	  --a 'beanstalkd -l 127.0.0.1 -p {port}' --b 'shardq serve -p {port}' \
	  --report docs/BENCHMARKS.md; rc=$$?; \
	echo "make bench: $$(( $$(date +%s) - start )) s"; exit $$rc

# The compiled load core of `shardq bench` (built with gcc into build/; `shardq bench` also
# builds it on first use).
loadcore: venv
	@$(call apt_need,gcc,gcc,gcc)
	$(BIN)/python -m shardq.bench.core

# Randomized invariant checking (tests/invariants/workload.py; `make test` runs its short
# form): each round a fresh shardq, producers, consumers and a kicker for --seconds, then a
# drain; any lost, stranded, doubly held or misdelivered job fails the round. Prints a replay
# command per failing seed; exit status 1 if any round failed. About 25 s per round.
STRESS_ARGS ?= --shards 2,4 --runs 100 --seconds 20
.PHONY: stress
stress: test-venv
	$(BIN)/python tools/stress.py $(STRESS_ARGS)
	SHARDQ_CHURN_LAYOUTS=all $(BIN)/pytest -q -n auto tests/integration/test_churn.py
