# dew_rl: every target creates the virtual environment in .venv when it is missing.
#   make test  - everything CI checks (export sync, jupytext twins, README, nbval + tests, site -W, browser)
#   make docs  - re-execute every notebook and build the site into docs/_build/html
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.dew_rl-dev-installed
NODE_STAMP := node_modules/.dew_rl-installed
SITE := docs/_build/html
SPHINX_FAST := -D nb_execution_mode=off

.PHONY: env browser test docs site check-sync export nb wrap readme clean bench conformance

$(STAMP): settings.ini setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel 2>&1 | grep -v "is ignored" || true
	$(PY) -m pip install -q -e ".[dev]" 2>&1 | grep -v "is ignored" || true
	@$(PY) -c "import dew_rl, jax, nbdev, nbval, sphinx, myst_nb, hypothesis" 
	@touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

env: $(STAMP) $(NODE_STAMP)

# The site's browser check needs Chromium; Debian's package is installed with apt when it is missing.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "installing chromium with apt (needed by tests/test_site_browser.py)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# The checks that a fresh clone fails on first: generated code and twins in step with the notebooks.
check-sync: env
	$(PY) tools/check_sync.py

# flock: the configuration writes the notebook copies into docs/, so two builds must not overlap.
site: env
	flock /tmp/dew_rl_site.lock $(BIN)/sphinx-build -W --keep-going -q -b html $(SPHINX_FAST) docs $(SITE)

test: env browser check-sync site
	DEW_RL_SITE=$(SITE) $(BIN)/pytest -n 2 --dist loadfile nbs tests
	@if [ "$$CI" = "true" ]; then \
	  if [ -n "$$(git status --porcelain)" ]; then echo "stray or modified files after the test run:"; git status --porcelain; exit 1; fi; \
	fi

docs: env
	DEW_RL_NO_PROGRESS=1 flock /tmp/dew_rl_site.lock $(BIN)/sphinx-build -b html -D nb_execution_mode=force docs $(SITE)
	@echo; echo "Site built: open $(abspath $(SITE))/index.html"

# Author a notebook: make nb NB=nbs/01_reductions.md (or .ipynb) - sync twins, execute, clean, export.
nb: env
	$(PY) tools/nb.py $(NB)

# Wrap the code cells of notebooks at 100 characters, then re-execute them: make wrap NB="nbs/02b_group_advantage.md nbs/02c_rloo.md"
# (tools/wrap_code.py --check nbs/*.md lists what is still over; a long docstring summary is shortened by hand).
wrap: env
	$(PY) tools/wrap_code.py $(NB)
	$(PY) tools/nb.py $(NB)

export: env
	$(BIN)/nbdev_export

readme: env
	$(PY) tools/make_readme.py

# Speed against verl, rlax and Tunix (their environments are built once, outside the repository, by
# tools/refenvs.py); writes data/bench.json, which nbs/07_benchmarks reads. Never part of make test.
# bench_train.py: examples/train.py's step against a plain-jnp GRPO loss (data/bench_train.json). bench_accel.py:
# on a GPU/TPU backend only, the accelerator rows (data/bench_accel.json); `--smoke` runs them tiny on a CPU.
bench: env
	$(PY) tools/bench.py
	$(PY) tools/bench_train.py
	$(PY) tools/bench_accel.py --if-accelerator
	$(PY) tools/bench_logits.py --vocab 32768 151936 --rounds 1 --no-warmup
	$(PY) tools/bench_logits.py --distill --vocab 32768 --memory-only 151936 --rounds 1 --no-warmup

# dew_rl against the frameworks themselves (each in its own environment, tools/refenvs.py): every suite of
# tools/conformance_harness.py (general, advantages, policyloss, entropy, offpolicy, preference, distill, frontier).
# Each rewrites its data/conformance*.json and outputs .npz and its entry of data/conformance_hashes.json, which the
# chapters and tests/test_conformance.py read. SUITES=offpolicy runs one suite only.
SUITES ?=
conformance: env
	$(PY) tools/conformance_harness.py $(SUITES)

clean:
	rm -rf $(SITE) docs/_site_src .pytest_cache
