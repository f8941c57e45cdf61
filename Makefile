# Two entry points, both self-sufficient on a fresh machine (they create .venv/ and install):
#   make demo   - the main job on an embedded default (wiring check of a Kimi-K2.5 pair)
#   make test   - the CPU test suite (GPU checks under test/gpu/ skip without CUDA)
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed-stamp

.PHONY: test demo venv clean promtool

venv: $(STAMP)

$(STAMP): pyproject.toml setup.py
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -e '.[test]'
	touch $@

# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (as on the machines this was built on):
# without .pyc files pytest rewrites every test module's asserts again in each worker, and every CLI
# subprocess compiles the package again (cached suite on 2 cores: 465 s without, 414 s with).
test: $(STAMP) promtool
	env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/python -m pytest -n auto --maxprocesses 4 test

# promtool checks the Grafana dashboard's PromQL (test/test_metrics.py). Best effort: an installed
# one, else the binary from Debian's prometheus package (apt-get download, no root); the test skips
# when neither is there.
promtool: $(STAMP)
	@test -x $(VENV)/bin/promtool || { p=$$(command -v promtool) && ln -sf "$$p" $(VENV)/bin/promtool; } 2>/dev/null || { \
	  d=$$(mktemp -d) && (cd $$d && timeout 120 apt-get -o Acquire::Retries=0 download prometheus >/dev/null 2>&1 && dpkg-deb -x prometheus_*.deb x \
	  && cp x/usr/bin/promtool $(CURDIR)/$(VENV)/bin/promtool); rm -rf $$d; } ; \
	test -x $(VENV)/bin/promtool || echo "promtool not available: the dashboard's PromQL check will skip"

demo: $(STAMP)
	$(VENV)/bin/python examples/demo.py

clean:
	rm -rf $(VENV) build python/*.egg-info
