"""Gradient baselines on the agent workload (the `rl` extra: TRL). Nothing here is imported by `coevo`."""
