"""Which class builds each workload kind: workloads are plugins, coevo's own included.

`[workload] kind` is a name registered under the entry-point group ``coevo.workloads`` (coevo registers
``ahd`` and ``agent`` there, as any installed package can), or ``path/to/file.py:Class`` /
``package.module:Class``. A workload class declares
  * ``settings_model``: its `[workload]` keys beyond `kind`, a subclass of
    `coevo.workload.WorkloadSettings` (None: no keys of its own);
  * ``family``: what its members are (`coevo.family`: HEURISTICS or EPISODES); the class must offer
    every member of its family's workload protocol, checked here, when it loads;
  * ``build(settings, facts, llm, host, sandbox)``: the workload a run scores on, from its own validated
    `[workload]` table, the run's facts (`coevo.context.RunFacts`), the LLM and weights host members
    play or write under, and `sandbox()`, the task's evaluator under the run's eval settings.
The config checks the table with the model and the runner and Ray workers build through
`coevo.run.build.build_workload`, so nothing else names a kind.
"""

from __future__ import annotations

from coevo.family import Family
from coevo.plugins import Registry
from coevo.workload import WorkloadSettings


def _requires(cls: type) -> str | None:
    model = getattr(cls, "settings_model", None)
    family = getattr(cls, "family", None)
    if not callable(getattr(cls, "build", None)) or not (
        model is None or (isinstance(model, type) and issubclass(model, WorkloadSettings))
    ):
        return "it needs build and settings_model: None or a subclass of coevo.workload.WorkloadSettings"
    if not isinstance(family, Family):
        return "it needs a family: coevo.family.HEURISTICS or EPISODES"
    if missing := family.missing(cls):
        return f"a workload of the {family.name} family also needs {', '.join(missing)}"
    return None


WORKLOADS = Registry("coevo.workloads", "workload", _requires)
workload_kinds = WORKLOADS.names
workload_class = WORKLOADS.get


def settings_model(kind: str) -> type[WorkloadSettings]:
    """The model of workload `kind`'s `[workload]` table (`kind` alone where the class declares none)."""
    return workload_class(kind).settings_model or WorkloadSettings
