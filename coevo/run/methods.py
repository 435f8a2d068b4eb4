"""Which class runs each method name: the one table of built-in methods, user methods named as plugins.

A method is named in a config as
  * a built-in name (the table below, `module:Class` strings, so nothing is imported until a run or a
    config check needs that one method);
  * a name registered by an installed package under the entry-point group ``coevo.methods``;
  * ``path/to/method.py:Class`` or ``package.module:Class``.
Each name has one class (`coevo.methods.base.Method`), which asks the workload what it can do.
"""

from __future__ import annotations

from coevo.plugins import PluginError, is_spec, load, registered

GROUP = "coevo.methods"

BUILT_IN: dict[str, str] = {
    "sample": "coevo.methods.sample:Sample",
    "eoh": "coevo.methods.eoh:EoH",
    "sample+es": "coevo.methods.sample_es:SampleES",
    "eoh+es": "coevo.methods.eoh_es:EoHES",
    "coevo": "coevo.methods.coevo:Coevo",
    "es": "coevo.methods.es:ES",
    "grpo": "coevo.methods.grpo:GRPO",
    "skills": "coevo.methods.skills:Skills",
    "es-then-skills": "coevo.methods.es_then_skills:ESThenSkills",
    "hill-climb": "coevo.methods.hill_climb:HillClimb",
}


def method_names() -> tuple[str, ...]:
    """Every method a config may name without a spec: the built-ins, then the installed packages'."""
    return tuple(dict.fromkeys([*BUILT_IN, *registered(GROUP)]))


def method_class(name: str) -> type:
    """The class of method `name` (a built-in or registered name, or a spec); PluginError (one line)
    when it cannot be found, loaded, or is not a method."""
    if not is_spec(name) and name not in BUILT_IN and name not in registered(GROUP):
        raise PluginError(
            f"unknown method {name!r}; known: {', '.join(method_names())} "
            "(or name one as path/to/file.py:Class or package.module:Class)"
        )
    cls = load(GROUP, BUILT_IN.get(name, name), "method")
    if not (callable(getattr(cls, "run_phase", None)) and isinstance(getattr(cls, "name", None), str)):
        raise PluginError(f"method {name!r}: {cls.__qualname__} is not a method (subclass coevo.methods.base.Method)")
    return cls
