"""Methods are named as plugins are: a registered name (coevo's own are entry points too) or a file/module spec;
the config checks a name and its settings without importing any method's behaviour until it is needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coevo.run.config import ConfigError, validate
from coevo.run.session import start_run

USER_METHOD = '''
from coevo.methods.base import Method
from coevo.operators.eoh_operators import ProposalRequest


class OnlyFresh(Method):
    """Never looks at a parent: a batch of i1 samples each step."""

    name = "only-fresh"
    phases = ("fresh",)

    def generation_phase(self, context, phase):
        context.population.add(context.propose([ProposalRequest("i1")] * 3))
'''

BASE = {"task": "tsp_construct", "model": "scripted_llm:build", "budget": 7, "population_size": 2}
BASE |= {"library": "none", "eval": {"limit": 2, "workers": 1}}


def test_a_method_from_the_users_file_runs_without_touching_coevo(tmp_path: Path) -> None:
    (tmp_path / "my_method.py").write_text(USER_METHOD)
    config = validate({**BASE, "method": f"{tmp_path / 'my_method.py'}:OnlyFresh"})
    with start_run(config, tmp_path / "run") as runner:
        runner.run()
        operators = [c.operator for _, c in runner.store.candidates()]
    assert operators == ["i1"] * 7, "generation 0 samples the population of 2, then steps of 3 up to the budget"


def test_a_broken_method_name_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "not_a_method.py").write_text("class Thing:\n    pass\n")
    for method, expected in [
        ("hill-climbing", "unknown method 'hill-climbing'; known methods: coevo, eoh, .*hill-climb"),
        (f"{tmp_path / 'missing.py'}:Climb", "file"),
        (f"{tmp_path / 'not_a_method.py'}:Thing", "is not a method"),
    ]:
        with pytest.raises(ConfigError, match=expected) as caught:
            validate({**BASE, "method": method})
        assert "\n" not in str(caught.value)


def test_the_config_module_imports_no_method() -> None:
    """Nor what a method's settings check: the skill loop's library reader, the operators' templates."""
    behaviour = ("coevo.methods", "coevo.skills", "coevo.operators")
    code = f"import sys, coevo.run.config; print(sorted(m for m in sys.modules if m.startswith({behaviour})))"
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert printed.strip() == "[]"
