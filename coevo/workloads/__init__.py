"""The built-in workloads, what a run's members are scored on: `heuristics` scores code an LLM writes
(automatic heuristic design), `agents` plays episodes. What every workload offers is `coevo.workload`."""
