"""`layergate capture`: a recording reverse proxy in front of an OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path

import click


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}", param_hint="--listen")
    return host or "127.0.0.1", int(port)


@click.command(name="capture")
@click.option("--upstream", required=True, metavar="URL",
              help="Base URL of the server to forward to, e.g. http://127.0.0.1:8000.")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Traffic file (JSONL) to append the captured records to.")
@click.option("--listen", default="127.0.0.1:8100", show_default=True, metavar="HOST:PORT",
              help="Where the proxy listens; point clients here instead of the upstream.")
@click.option("--redact", is_flag=True,
              help="Mask e-mail addresses, phone numbers and API-key-like strings in the "
                   "recorded prompts and responses.")
@click.option("--sample", type=click.FloatRange(0, 1, min_open=True), default=1.0,
              show_default=True, help="Share of chat / completions requests to record.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=600.0,
              show_default=True, help="Seconds to wait for the upstream per request.")
@click.option("--seed", type=int, help="Seed of the sampling (default: random).")
def command(upstream: str, out: Path, listen: str, redact: bool, sample: float, timeout: float,
            seed: int | None) -> None:
    """Forward every request to --upstream and return its answer unchanged (streaming
    passes through as it arrives), while appending sampled POST /v1/chat/completions and
    /v1/completions request + response pairs to --out in the traffic format.

    Headers (so Authorization) are never written. A streamed answer is recorded as the
    equivalent non-streamed response. If a record cannot be written the client still gets
    its answer; the failure is logged and counted (GET /-/capture/metrics on the proxy).
    Stop with Ctrl-C.
    """
    from harness.capture import CaptureConfig, run_capture

    if not upstream.startswith(("http://", "https://")):
        raise click.BadParameter(f"must be an http(s) URL: {upstream!r}", param_hint="--upstream")
    host, port = _listen(listen)
    config = CaptureConfig(upstream=upstream, out=out, host=host, port=port, redact=redact,
                           sample=sample, timeout=timeout, seed=seed)
    click.echo(f"capturing {upstream} on http://{host}:{port} -> {out}"
               f"{' (redacted)' if redact else ''}; Ctrl-C to stop", err=True)
    run_capture(config)
