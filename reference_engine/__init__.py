"""The reference engine: the system under test, served over an OpenAI-compatible API."""
