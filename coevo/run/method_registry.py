"""Which class runs each method name: methods are plugins, coevo's own included.

A method is named in a config as
  * a name registered under the entry-point group ``coevo.methods``: coevo registers its own there
    (pyproject.toml), as any installed package can, and nothing is imported until a run or a config
    check needs that one method;
  * ``path/to/method.py:Class`` or ``package.module:Class``.
Each name has one class (`coevo.methods.base.Method`), which asks the workload what it can do.
"""

from __future__ import annotations

from coevo.plugins import Registry


def _requires(cls: type) -> str | None:
    if callable(getattr(cls, "run_phase", None)) and isinstance(getattr(cls, "name", None), str):
        return None
    return "subclass coevo.methods.base.Method"


METHODS = Registry("coevo.methods", "method", _requires)
method_names = METHODS.names
method_class = METHODS.get
