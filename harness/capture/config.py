"""`CaptureConfig`: where the capture proxy listens, what it forwards to, what it records."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class CaptureConfig:
    upstream: str = field(metadata={
        "help": "Base URL of the server to forward to, e.g. http://127.0.0.1:8000."})
    out: Path = field(metadata={
        "help": "Traffic file (JSONL) to append the captured records to."})
    host: str = field(default="127.0.0.1", metadata={"help": "Address the proxy listens on."})
    port: int = field(default=8100, metadata={"help": "Port the proxy listens on.", "min": 1,
                                              "max": 65535})
    redact: bool = field(default=False, metadata={
        "help": "Mask e-mail addresses, phone numbers and API-key-like strings in the recorded "
                "prompts and responses."})
    sample: float = field(default=1.0, metadata={
        "help": "Share of chat / completions requests to record.", "min": 0, "max": 1,
        "min_open": True})
    timeout: float = field(default=600.0, metadata={
        "help": "Seconds to wait for the upstream per request.", "min": 0, "min_open": True})
    seed: int | None = field(default=None, metadata={
        "help": "Seed of the sampling (default: random)."})
