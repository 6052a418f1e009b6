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
DASHBOARD := http://127.0.0.1:8265
MCP_URL := http://127.0.0.1:$(MCP_PORT)/mcp/
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
# starts, and every command that talks to it, use the token (target-specific exports below).
export RAY_AUTH_MODE := disabled
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER := 0
export SAMESPACE_STORE__DATA_DIR ?= $(STATE)/data
export SAMESPACE_SERVE__PORT := $(MCP_PORT)
export SAMESPACE_ADMIN__TOKEN_FILE ?= $(STATE)/admin-token
export SAMESPACE_ADMIN__CONFIG_PATH ?= $(STATE)/config.json

.PHONY: help venv ray-token run stop test test-fast bench status push-key set-policy

run stop: export RAY_AUTH_MODE := token
run stop: export RAY_AUTH_TOKEN_PATH := $(RAY_TOKEN)

help:
	@echo "make run   [REPO=/path NAME=name]  local Ray + MCP server, index REPO (default: this repo)"
	@echo "make stop                         stop everything make run started"
	@echo "make ray-token                    the cluster token (.samespace/ray-token); before 'ray up cluster.yaml'"
	@echo "make status | push-key < key.txt | set-policy ROLE=.. POLICY=..   admin API from the shell"
	@echo "make test                         the whole test suite"
	@echo "make test-fast                    unit and contract tests, random order (about 1.5 min)"
	@echo "make bench                        reindex/search and cloud-budget benchmarks (bench/)"

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

# Ray's own ports (GCS, raylet, object manager, agents, client server, dashboard) and the Serve
# proxy listen on 127.0.0.1. Ray 2.60 binds each Serve replica's inter-deployment gRPC server
# to [::] (every interface) with no setting to change it; the token is what guards that port.
run: $(STAMP) $(RAY_TOKEN)
	@chmod 700 $(STATE)
	@test -s $(STATE)/admin-token || (umask 077; python -c "import secrets; print(secrets.token_urlsafe(32))" > $(STATE)/admin-token)
	@if ! ray status --address 127.0.0.1:6379 >/dev/null 2>&1; then \
	  echo "starting a local Ray head (token auth on, usage stats off, Ray's ports on 127.0.0.1)"; \
	  ray start --head --num-cpus=$$(nproc) --disable-usage-stats --node-ip-address=127.0.0.1 \
	    --dashboard-host=127.0.0.1 --port=6379 >$(STATE)/ray-start.log 2>&1 \
	    || { cat $(STATE)/ray-start.log; exit 1; }; \
	fi
	@if [ "$$(curl -s -o /dev/null -w '%{http_code}' $(DASHBOARD)/api/version)" = 200 ]; then \
	  echo "warning: the running Ray head has token auth off (started before it was on);" \
	    "'make stop && make run' restarts it with the token"; \
	fi
	serve deploy --address $(DASHBOARD) serve_config.yaml
	@echo "waiting for the MCP server at $(MCP_URL)"
	@for i in $$(seq 1 120); do curl -sf http://127.0.0.1:$(MCP_PORT)/healthz >/dev/null && break; sleep 1; done; \
	  curl -sf http://127.0.0.1:$(MCP_PORT)/healthz >/dev/null || { serve status --address $(DASHBOARD); exit 1; }
	ray job submit --address $(DASHBOARD) --working-dir . -- \
	  python -m jobs.reindex --repo "$(abspath $(REPO))" --name "$(NAME)"
	@echo
	@echo "MCP server: $(MCP_URL)"
	@echo "Client config (Claude Code .mcp.json / Cursor .cursor/mcp.json):"
	@python -m serve_apps.mcp_client --url $(MCP_URL) --print-config
	@echo
	@python -m serve_apps.mcp_client --url $(MCP_URL) -k 5 "$(QUERY)"
	@echo
	@echo "Admin API: http://127.0.0.1:$(MCP_PORT)/admin/ (bearer token in $(STATE)/admin-token)"
	@echo "The cluster stays up: dashboard $(DASHBOARD) (token auth: the token is in $(RAY_TOKEN));"
	@echo "'make stop' stops it. Other Ray commands need: export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$(RAY_TOKEN)"

status:
	@python -m serve_apps.admin_client status

push-key:  # the key on stdin: make push-key < key.txt (never on the command line)
	@python -m serve_apps.admin_client push-key

set-policy:  # make set-policy ROLE=code-embedding POLICY=backup
	@python -m serve_apps.admin_client set-policy "$(ROLE)" "$(POLICY)"

stop:
	-@serve shutdown --address $(DASHBOARD) -y >/dev/null 2>&1
	-@ray stop >/dev/null 2>&1 && echo "ray stopped"

# The whole suite in file order (some e2e modules still share state across tests).
test: $(STAMP)
	python -m pytest -q -p no:randomly

# Unit and contract tests only, in random order (pytest-randomly; the seed is printed to rerun it).
test-fast: $(STAMP)
	python -m pytest tests/unit

bench: $(STAMP)
	python -m bench.run
	python -m bench.budget
	python -m bench.ask
	python -m bench.fleet
	python -m bench.pathological
