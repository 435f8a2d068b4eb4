"""Which class runs each method name: methods are plugins, coevo's own included.

A method is named in a config as
  * a name registered under the entry-point group ``coevo.methods``: coevo registers its own there
    (pyproject.toml), as any installed package can, and nothing is imported until a run or a config
    check needs that one method;
  * ``path/to/method.py:Class`` or ``package.module:Class``.
Each name has one class (`coevo.methods.base.Method`), which asks the workload what it can do.
"""

from __future__ import annotations

from coevo.plugins import PluginError, is_spec, load, registered

GROUP = "coevo.methods"


def method_names() -> tuple[str, ...]:
    """Every method a config may name without a spec (registered in ``coevo.methods``)."""
    return tuple(registered(GROUP))


def method_class(name: str) -> type:
    """The class of method `name` (a built-in or registered name, or a spec); PluginError (one line)
    when it cannot be found, loaded, or is not a method."""
    if not is_spec(name) and name not in registered(GROUP):
        raise PluginError(
            f"unknown method {name!r}; known: {', '.join(method_names())} "
            "(or name one as path/to/file.py:Class or package.module:Class)"
        )
    cls = load(GROUP, name, "method")
    if not (callable(getattr(cls, "run_phase", None)) and isinstance(getattr(cls, "name", None), str)):
        raise PluginError(f"method {name!r}: {cls.__qualname__} is not a method (subclass coevo.methods.base.Method)")
    return cls
