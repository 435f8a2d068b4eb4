"""Workloads: what a run's members are scored on. `protocol` declares what every workload offers;
`heuristics` scores code an LLM writes (automatic heuristic design), `agents` plays episodes."""
