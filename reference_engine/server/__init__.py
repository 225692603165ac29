"""The reference engine's OpenAI-compatible HTTP server."""

from layergate.reference_engine.server.app import ServerSettings, create_app

__all__ = ["ServerSettings", "create_app"]
