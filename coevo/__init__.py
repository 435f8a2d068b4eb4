"""coevo: co-evolve what an LLM is told (prompts, skills) and what it is (its weights)."""

__version__ = "0.1.0"
