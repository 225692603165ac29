"""Calibration prompts: traffic records tokenized exactly as the server tokenizes them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layergate.exporters.traffic import CHAT, read_traffic, traffic_sha256
from layergate.reference_engine.server.errors import APIError
from layergate.reference_engine.server.prompts import chat_prompt_ids, completion_prompt_ids
from layergate.reference_engine.server.schemas import ChatMessage


@dataclass(frozen=True)
class CalibrationPrompt:
    id: str
    scenario: str
    prompt_ids: tuple[int, ...]
    max_tokens: int


@dataclass(frozen=True)
class CalibrationTraffic:
    path: Path
    sha256: str
    prompts: tuple[CalibrationPrompt, ...]


def load_prompts(path: str | Path, tokenizer: Any, *, max_prompts: int, max_tokens: int,
                 vocab_size: int) -> CalibrationTraffic:
    """The first `max_prompts` requests of a traffic file (errors name file, line, field),
    each generating at most `max_tokens` tokens."""
    traffic = read_traffic(path)
    prompts = []
    for record in traffic.records[:max_prompts]:
        body = record.body
        try:
            if record.endpoint == CHAT:
                ids = chat_prompt_ids(tokenizer, [ChatMessage(**m) for m in body["messages"]])
            else:
                ids = completion_prompt_ids(tokenizer, body.get("prompt", ""), vocab_size)
        except (APIError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: request {record.id!r}: cannot tokenize: {exc}") from exc
        if not ids:
            raise ValueError(f"{path}: request {record.id!r}: empty prompt")
        limit = min(record.max_tokens or max_tokens, max_tokens)
        prompts.append(CalibrationPrompt(record.id, record.scenario, tuple(ids), limit))
    return CalibrationTraffic(Path(path), traffic_sha256(path), tuple(prompts))
