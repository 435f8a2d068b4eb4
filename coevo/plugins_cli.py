"""`coevo plugins`: every kind of plugin and what is installed of each, with where it comes from."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from coevo.plugins import Registry


def registries() -> tuple[Registry, ...]:
    """Every plugin kind coevo looks names up in, in the order a run meets them."""
    from coevo.es.strategy import STRATEGIES
    from coevo.run.backend_registry import BACKENDS
    from coevo.run.embedder_registry import EMBEDDERS
    from coevo.run.executor import EXECUTORS
    from coevo.run.method_registry import METHODS
    from coevo.run.workload_registry import WORKLOADS
    from tasks import TASKS
    from tasks.agents import ENVIRONMENTS

    return (METHODS, WORKLOADS, TASKS, ENVIRONMENTS, BACKENDS, EXECUTORS, STRATEGIES, EMBEDDERS)


def installed() -> list[dict[str, str]]:
    """One row per (kind, name): its class, the package that provides it and the entry-point group."""
    return [
        {"kind": registry.kind, "name": name, "class": spec, "package": package, "group": registry.group}
        for registry in registries()
        for name, (spec, package) in registry.sources().items()
    ]


def register(app: typer.Typer) -> None:
    @app.command("plugins")
    def plugins(
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """List the installed plugins by kind (methods, workloads, tasks, environments, backends,
        executors, ES strategies, embedders) and where each comes from. Any of them can also be named
        as path/to/file.py:Class or package.module:Class."""
        rows = installed()
        if as_json:
            print(json.dumps(rows, indent=2))
            return
        table = Table(title="coevo plugins")
        for column in ("kind", "name", "class", "package"):
            table.add_column(column)
        for row in rows:
            table.add_row(row["kind"], row["name"], row["class"], row["package"])
        Console().print(table)
