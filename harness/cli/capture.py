"""`layergate capture`: a recording reverse proxy in front of an OpenAI-compatible server.
Its options are `CaptureConfig`'s fields (`--listen` is its host and port)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.cli_options import config_field, config_values, field_default, field_option
from layergate.harness.capture.config import CaptureConfig
from layergate.harness.cli.exits import exits

HOST, PORT = (field_default(config_field(CaptureConfig, name)) for name in ("host", "port"))


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}", param_hint="--listen")
    return host or HOST, int(port)


@exits(ExitCode.PASS, PASS="stopped (Ctrl-C)")
@click.command(name="capture")
@field_option(CaptureConfig, "upstream", required=True, metavar="URL")
@field_option(CaptureConfig, "out", required=True,
              type=click.Path(dir_okay=False, path_type=Path))
@click.option("--listen", default=f"{HOST}:{PORT}", show_default=True, metavar="HOST:PORT",
              help="Where the proxy listens; point clients here instead of the upstream.")
@field_option(CaptureConfig, "redact")
@field_option(CaptureConfig, "sample")
@field_option(CaptureConfig, "timeout")
@field_option(CaptureConfig, "seed")
@click.pass_context
def command(ctx: click.Context, listen: str, **_: Any) -> None:
    """Forward every request to --upstream and return its answer unchanged (streaming
    passes through as it arrives), while appending sampled POST /v1/chat/completions and
    /v1/completions request + response pairs to --out in the traffic format.

    Headers (so Authorization) are never written. A streamed answer is recorded as the
    equivalent non-streamed response. If a record cannot be written the client still gets
    its answer; the failure is logged and counted (GET /-/capture/metrics on the proxy).
    Stop with Ctrl-C.
    """
    from layergate.harness.capture import run_capture

    values = config_values(ctx, CaptureConfig)
    if not values["upstream"].startswith(("http://", "https://")):
        raise click.BadParameter(f"must be an http(s) URL: {values['upstream']!r}",
                                 param_hint="--upstream")
    host, port = _listen(listen)
    config = CaptureConfig(host=host, port=port, **values)
    click.echo(f"capturing {config.upstream} on http://{host}:{port} -> {config.out}"
               f"{' (redacted)' if config.redact else ''}; Ctrl-C to stop", err=True)
    run_capture(config)
