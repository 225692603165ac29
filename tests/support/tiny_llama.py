"""A tiny randomly initialised Llama with the real SmolLM2 tokenizer, for mechanical engine
tests (batching, caches, scheduling) that do not need a model that makes sense."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.loading import LoadedModel, ensure_converted


def tiny_model(num_layers: int = 4, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=num_layers, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=1, eos_token_id=2, pad_token_id=2)
    return LlamaForCausalLM(cfg).eval()


def tiny_loaded(num_layers: int = 4, seed: int = 0) -> LoadedModel:
    """A LoadedModel to hand to `Engine(config, loaded=...)`."""
    path = ensure_converted()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = tiny_model(num_layers, seed)
    return LoadedModel(model, tokenizer, "tiny-llama", Path("tiny"), num_layers, 512,
                       torch.device("cpu"), {"dtype": "fp32", "threads": 1, "seed": seed})


def tiny_config(**overrides) -> EngineConfig:
    return EngineConfig(**{"model": "tiny-llama", "threads": 1, **overrides})


def write_tiny_checkpoint(_source: Path, out: Path, num_layers: int = 2) -> None:
    """A stand-in conversion for cache-mechanics tests: writes a real (tiny) checkpoint."""
    tiny_model(num_layers).save_pretrained(out)
    AutoTokenizer.from_pretrained(ensure_converted()).save_pretrained(out)
