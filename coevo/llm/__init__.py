"""LLM layer: backends that generate text under the current weights, and the embedded-model loader."""
