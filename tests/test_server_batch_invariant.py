"""Under `--batch-invariant`, 8 concurrent requests over HTTP give exactly the tokens each
gives alone (real model, an engine of its own)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support.processes import engine

pytestmark = [pytest.mark.model, pytest.mark.slow]

PROMPTS = ["Hi!", "What is 2 + 2?", "Name three fruits.",
           "Write a haiku about autumn leaves falling on a quiet pond.",
           "Explain gravity to a child in one sentence.", "Translate 'cat' into French.",
           "List the days of the week, starting on Monday, separated by commas.", "Why?"]


def test_concurrent_outputs_match_one_at_a_time():
    with engine("--policy", "full", "--batch-invariant", "--max-batch-size", "8") as proc:
        def tokens(prompt: str) -> list[int]:
            r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=120, json={
                "messages": [{"role": "user", "content": prompt}], "max_tokens": 5,
                "temperature": 0})
            assert r.status_code == 200, r.text
            assert r.json()["layergate"]["batch_invariant"] is True
            return r.json()["layergate"]["token_ids"]

        alone = [tokens(p) for p in PROMPTS]
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(tokens, PROMPTS))
    assert together == alone
