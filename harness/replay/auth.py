"""Worker tokens: who may join a replay's master. The master and each worker read the same
secret (`--worker-token-file`, or the `LAYERGATE_WORKER_TOKEN` environment variable). A
worker's hello carries an HMAC-SHA256 of its name and wall clock under the token, never the
token itself; the master refuses a hello without a valid proof. This authenticates the
worker; it does not encrypt the channel (records and results still travel in the clear).

The token reaches Locust's processes only in their environment: it is never logged, never
in a message, never in the run directory.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from layergate.exporters.errors import UsageError

TOKEN_ENV = "LAYERGATE_WORKER_TOKEN"
MIN_LENGTH = 16  # a guessable token authenticates nothing


class TokenError(UsageError, ValueError):
    pass


def read_token_file(path: Path) -> str:
    """The token in `path` (surrounding whitespace stripped); TokenError naming the file."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"--worker-token-file {path}: cannot read it ({exc})") from exc
    return check_token(token, f"--worker-token-file {path}")


def check_token(token: str, where: str) -> str:
    if len(token) < MIN_LENGTH:
        raise TokenError(f"{where}: the worker token must be at least {MIN_LENGTH} characters "
                         f"(got {len(token)}); e.g. `openssl rand -hex 32 > token`")
    return token


def token_from(path: Path | None, environ: Mapping[str, str]) -> str | None:
    """The run's token: from the file when given, else the environment, else None."""
    if path is not None:
        return read_token_file(path)
    token = environ.get(TOKEN_ENV)
    return check_token(token.strip(), f"${TOKEN_ENV}") if token else None


def proof(token: str, name: str, wall_time: float) -> str:
    message = f"layergate-worker\n{name}\n{wall_time!r}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def signed_hello(hello: dict[str, Any], environ: Mapping[str, str] = os.environ
                 ) -> dict[str, Any]:
    """The hello with its proof, when this process holds a token."""
    token = environ.get(TOKEN_ENV)
    if not token:
        return hello
    return {**hello, "proof": proof(token.strip(), str(hello["name"]),
                                    float(hello["wall_time"]))}


def refusal(token: str | None, hello: dict[str, Any]) -> str | None:
    """Why the master refuses this hello's credentials, or None to accept them."""
    if token is None:
        return None
    name, given = hello.get("name"), hello.get("proof")
    if not isinstance(given, str):
        return (f"worker {name!r} has no worker token: this run needs one "
                f"(--worker-token-file or ${TOKEN_ENV})")
    try:
        expected = proof(token, str(name), float(hello.get("wall_time", 0.0)))
    except (TypeError, ValueError):
        expected = ""
    if not hmac.compare_digest(given, expected):
        return f"worker {name!r} presented a wrong worker token"
    return None
