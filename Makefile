# Two entry points, both self-sufficient on a fresh machine (they create .venv/ and install):
#   make demo   - the main job on an embedded default (wiring check of a Kimi-K2.5 pair)
#   make test   - the CPU test suite (GPU checks under test/gpu/ skip without CUDA)
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed-stamp

.PHONY: test demo venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml setup.py
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -e '.[test]'
	touch $@

test: $(STAMP)
	$(VENV)/bin/python -m pytest -n auto --maxprocesses 4 test

demo: $(STAMP)
	$(VENV)/bin/python examples/demo.py

clean:
	rm -rf $(VENV) build python/*.egg-info
