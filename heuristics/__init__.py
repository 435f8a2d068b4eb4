"""Seed, classical and evolved heuristics: the skill library."""
