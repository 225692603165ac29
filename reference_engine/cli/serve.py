"""`layergate serve`: run the reference engine behind its OpenAI-compatible HTTP API.

Its options are `EngineConfig`'s fields (reference_engine/config.py, torch-free, with the
skip-policy names from the registry, which imports no policy). The engine itself, and
torch, load only inside the command, so `layergate --help` and every other command stay
free of torch.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Any

import click

from layergate.exporters import extras
from layergate.exporters.cli_options import config_values, field_option
from layergate.reference_engine.config import DEFAULT_MODEL, EngineConfig

log = logging.getLogger("layergate.serve")


def _layer_list(value: str) -> tuple[int, ...]:
    try:
        layers = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError as exc:
        raise ValueError(f"expected comma-separated layer indices like 3,4 — got "
                         f"{value!r}") from exc
    if any(i < 0 for i in layers):
        raise ValueError(f"layer indices must be >= 0, got {value!r}")
    return layers


def _key_values(value: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in value:
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        pairs.append((key.strip(), val.strip()))
    return tuple(pairs)


def _model(value: str) -> str:
    """Fail fast, before torch loads, on a model that is neither the bundled name nor a dir."""
    if value != DEFAULT_MODEL and not Path(value).expanduser().is_dir():
        raise ValueError(f"{value}: no such directory (give `{DEFAULT_MODEL}` or a local "
                         "Hugging Face Llama-family model directory)")
    return value


def _engine_option(name: str, *flags: str, **attrs: Any):
    return field_option(EngineConfig, name, *flags, **attrs)


@click.command("serve")
@_engine_option("skip_policy", deprecated=("--policy",))
@_engine_option("rules", type=click.Path(exists=True, dir_okay=False))
@_engine_option("skip_layers", parse=_layer_list, metavar="I,J,...")
@_engine_option("skip_policy_options", "--skip-policy-option", multiple=True,
                parse=_key_values, metavar="KEY=VALUE", deprecated=("--policy-option",))
@_engine_option("dry_run")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind; loopback unless you mean to expose it.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@_engine_option("model", parse=_model, show=str)
@click.option("--api-key", default=None,
              help="Require `Authorization: Bearer KEY` on /v1/* (health, metrics stay open).")
@_engine_option("dtype")
@_engine_option("device")
@_engine_option("threads")
@_engine_option("seed")
@_engine_option("batch_invariant")
@_engine_option("padding")
@_engine_option("prefix_cache")
@_engine_option("max_batch_size")
@_engine_option("max_queue")
@_engine_option("max_model_len")
@_engine_option("reasoning_parser")
@click.option("--log-level", type=click.Choice(("debug", "info", "warning", "error")),
              default="info", show_default=True)
@click.pass_context
def command(ctx: click.Context, **options: Any) -> None:
    """Serve the reference engine over an OpenAI-compatible API.

    Routes: POST /v1/chat/completions and /v1/completions (streaming or not), GET /v1/models,
    /health (200 once the model is loaded) and /metrics (Prometheus). Each response carries
    a `layergate` object with what the engine did (layers executed, drafts, cache hits).
    Chat requests with `tools` get the model's pythonic calls (`[f(x=1)]`) as `tool_calls`;
    --reasoning-parser granite (or a request's chat_template_kwargs {"thinking": true})
    sends the text between granite's markers as `reasoning`.
    SIGTERM stops accepting, finishes in-flight requests, then exits 0.
    Needs the `engine` extra: pip install 'layergate[engine]'.
    """
    extras.require(extras.ENGINE, "serve")
    logging.basicConfig(level=options["log_level"].upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = EngineConfig(**config_values(ctx, EngineConfig))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    # the model and torch load only now, never at import
    import uvicorn
    from prometheus_client import CollectorRegistry

    from layergate.exporters.otlp import tracer_provider_from_env
    from layergate.reference_engine.engine import Engine
    from layergate.reference_engine.server import ServerSettings, create_app
    from layergate.reference_engine.tracing import SERVICE_NAME

    registry = CollectorRegistry()
    try:
        engine = Engine(config, registry)
    except (ValueError, FileNotFoundError) as exc:
        raise click.UsageError(str(exc)) from exc
    numerics = getattr(engine.loaded, "numerics", {})
    log.info("numerics: model=%s layers=%d dtype=%s threads=%s seed=%d device=%s skip_policy=%s "
             "dry_run=%s batch_invariant=%s padding=%s prefix_cache=%s", engine.model_name,
             engine.num_layers, config.dtype, numerics.get("threads", config.threads),
             config.seed, numerics.get("device", config.device), config.skip_policy,
             config.dry_run, config.batch_invariant, config.padding, config.prefix_cache)
    app = create_app(engine, registry, ServerSettings(api_key=options["api_key"],
                                                      reasoning_parser=config.reasoning_parser),
                     tracer_provider=tracer_provider_from_env(SERVICE_NAME))
    host, port = options["host"], options["port"]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port,
                                           log_level=options["log_level"], access_log=False,
                                           timeout_graceful_shutdown=None))
    # uvicorn re-raises the signal it shut down on; a handler here turns that into exit 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.run()
    if not server.started:
        raise click.ClickException(f"the server did not start on {host}:{port}")
    log.info("stopped cleanly")
