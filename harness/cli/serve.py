"""`layergate serve`: run the reference engine behind its OpenAI-compatible HTTP API.

Only this module (and `calibrate`) reaches `reference_engine`, and only inside the command,
so `layergate --help` and every other command stay free of torch.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Any

import click

POLICIES = ("full", "static", "dynamic", "speculative")
DEFAULT_MODEL = "smollm2-135m"
log = logging.getLogger("layergate.serve")


def _layer_list(_: click.Context, __: click.Parameter, value: str | None) -> tuple[int, ...]:
    if not value:
        return ()
    try:
        layers = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError as exc:
        raise click.BadParameter(f"expected comma-separated layer indices like 3,4 — got "
                                 f"{value!r}") from exc
    if any(i < 0 for i in layers):
        raise click.BadParameter(f"layer indices must be >= 0, got {value!r}")
    return layers


def _key_values(_: click.Context, __: click.Parameter,
                value: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in value:
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}")
        pairs.append((key.strip(), val.strip()))
    return tuple(pairs)


def _model(_: click.Context, __: click.Parameter, value: str) -> str:
    """Fail fast, before torch loads, on a model that is neither the bundled name nor a dir."""
    if value != DEFAULT_MODEL and not Path(value).expanduser().is_dir():
        raise click.BadParameter(f"{value}: no such directory (give `{DEFAULT_MODEL}` or a "
                                 "local Hugging Face Llama-family model directory)")
    return value


@click.command("serve")
@click.option("--policy", type=click.Choice(POLICIES), default="full", show_default=True,
              help="Which layers run: full depth, a static pruned set, dynamic skipping by "
                   "rules, or self-speculative decoding.")
@click.option("--rules", type=click.Path(exists=True, dir_okay=False),
              help="Rules file written by `layergate calibrate` for static, dynamic and "
                   "speculative (default: the bundled calibrated one of the model).")
@click.option("--skip-layers", callback=_layer_list, metavar="I,J,...",
              help="Decoder layers to skip under `static` (or the draft's under "
                   "`speculative`), e.g. 3,4; default: from the rules file.")
@click.option("--policy-option", "policy_option", multiple=True, callback=_key_values,
              metavar="KEY=VALUE",
              help="Policy setting over the rules file, repeatable; `speculative`: gamma=N "
                   "(drafted tokens per step), exit_after=E (draft exits after layer E), "
                   "head_tokens=N (draft LM head cut to the first N ids).")
@click.option("--dry-run", is_flag=True,
              help="Decide and report what the policy would skip, but run every layer.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind; loopback unless you mean to expose it.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--model", default=DEFAULT_MODEL, show_default=True, callback=_model,
              help="`smollm2-135m` (the bundled GGUF) or a local Hugging Face Llama-family "
                   "directory.")
@click.option("--api-key", default=None,
              help="Require `Authorization: Bearer KEY` on /v1/* (health, metrics stay open).")
@click.option("--dtype", type=click.Choice(("fp32", "bf16")), default="fp32", show_default=True)
@click.option("--device", type=click.Choice(("auto", "cpu", "cuda")), default="auto",
              show_default=True)
@click.option("--threads", type=click.IntRange(min=0), default=0, show_default=True,
              help="torch threads; 0 = torch's default. Recorded with the numerics.")
@click.option("--seed", type=int, default=0, show_default=True, help="Global seed, pinned.")
@click.option("--batch-invariant", is_flag=True,
              help="A request's output never depends on what else is in the batch.")
@click.option("--padding", type=click.Choice(("bucketed", "max")), default="bucketed",
              show_default=True,
              help="Pad within prompt-length buckets, or every batch to its longest sequence.")
@click.option("--prefix-cache", type=click.Choice(("on", "off")), default="on",
              show_default=True, help="Reuse KV of shared prompt prefixes.")
@click.option("--max-batch-size", type=click.IntRange(min=1), default=8, show_default=True,
              help="Sequences decoded together at most.")
@click.option("--max-queue", type=click.IntRange(min=1), default=64, show_default=True,
              help="Waiting requests at most; past it the server answers 429 + Retry-After.")
@click.option("--max-model-len", type=click.IntRange(min=2), default=None,
              help="Context length (prompt + completion); default min(2048, the model's).")
@click.option("--log-level", type=click.Choice(("debug", "info", "warning", "error")),
              default="info", show_default=True)
def command(**options: Any) -> None:
    """Serve the reference engine over an OpenAI-compatible API.

    Routes: POST /v1/chat/completions and /v1/completions (streaming or not), GET /v1/models,
    /health (200 once the model is loaded) and /metrics (Prometheus). Each response carries
    a `layergate` object with what the engine did (layers executed, drafts, cache hits).
    SIGTERM stops accepting, finishes in-flight requests, then exits 0.
    """
    logging.basicConfig(level=options["log_level"].upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = _engine_config(options)
    # the model and torch load only now, never at import
    import uvicorn
    from prometheus_client import CollectorRegistry

    from reference_engine.engine import Engine
    from reference_engine.server import ServerSettings, create_app
    from reference_engine.tracing import tracer_provider_from_env

    registry = CollectorRegistry()
    try:
        engine = Engine(config, registry)
    except (ValueError, FileNotFoundError) as exc:
        raise click.UsageError(str(exc)) from exc
    numerics = getattr(engine.loaded, "numerics", {})
    log.info("numerics: model=%s layers=%d dtype=%s threads=%s seed=%d device=%s policy=%s "
             "dry_run=%s batch_invariant=%s padding=%s prefix_cache=%s", engine.model_name,
             engine.num_layers, config.dtype, numerics.get("threads", config.threads),
             config.seed, numerics.get("device", config.device), config.policy,
             config.dry_run, config.batch_invariant, config.padding, config.prefix_cache)
    app = create_app(engine, registry, ServerSettings(api_key=options["api_key"]),
                     tracer_provider=tracer_provider_from_env())
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


def _engine_config(options: dict):
    from reference_engine.config import EngineConfig  # stdlib-only module, but keep it local

    try:
        return EngineConfig(
            model=options["model"], dtype=options["dtype"], device=options["device"],
            threads=options["threads"], seed=options["seed"], policy=options["policy"],
            rules=options["rules"], skip_layers=options["skip_layers"],
            policy_options=options["policy_option"],
            dry_run=options["dry_run"], batch_invariant=options["batch_invariant"],
            padding=options["padding"], prefix_cache=options["prefix_cache"],
            max_batch_size=options["max_batch_size"], max_queue=options["max_queue"],
            max_model_len=options["max_model_len"])
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
