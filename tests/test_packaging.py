"""What `pip install coevo` asks for: no reference solvers or DSPy outside their extras, ranges (not
pins) for torch and transformers, and a one-line hint where an extra's package is missing."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.metadata
import sys
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from coevo.extras import MissingExtra, require
from tasks.kp_construct import KPConstruct
from tasks.tsp_construct import TSPConstruct

ROOT = Path(__file__).resolve().parent.parent


def _requirements(extra: str | None = None) -> dict[str, Requirement]:
    """coevo's installed requirements: those of a plain install, or those the extra adds."""
    found = {}
    for line in importlib.metadata.requires("coevo") or []:
        requirement = Requirement(line)
        marker = requirement.marker
        wanted = marker is None if extra is None else marker is not None and marker.evaluate({"extra": extra})
        if wanted:
            found[requirement.name] = requirement
    return found


def test_a_plain_install_requires_no_reference_solver_nor_dspy() -> None:
    assert {"ortools", "elkai", "dspy"}.isdisjoint(_requirements())
    assert {"ortools", "elkai"} <= set(_requirements("references"))
    assert "dspy" in _requirements("dspy")


@pytest.mark.parametrize("name", ["torch", "transformers"])
def test_torch_and_transformers_are_ranges_that_hold_the_constrained_version(name: str) -> None:
    specifier = _requirements()[name].specifier
    assert all(spec.operator in (">=", "<") for spec in specifier)  # a range, not a pin
    pins = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line)
    assert Version(pins[name]) in specifier
    assert Version(importlib.metadata.version(name)).base_version == pins[name]  # the suite runs on the pin


class _Uninstalled(importlib.abc.MetaPathFinder):
    """Makes packages look uninstalled: importing them fails as it does for a package that is not there."""

    def __init__(self, packages: set[str]) -> None:
        self.packages = packages

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        top = fullname.split(".")[0]
        if top in self.packages:
            raise ModuleNotFoundError(f"No module named {top!r}", name=top)


def _uninstall(monkeypatch: pytest.MonkeyPatch, *packages: str) -> None:
    for name in [name for name in sys.modules if name.split(".")[0] in packages]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Uninstalled(set(packages)), *sys.meta_path])


def test_a_missing_reference_solver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _uninstall(monkeypatch, "elkai", "ortools")
    coords = np.random.default_rng(0).random((6, 2))
    with pytest.raises(
        MissingExtra, match=r"^the TSP reference \(LKH-3\) needs elkai: pip install -e '\.\[references\]' -c constraints\.txt$"
    ):
        TSPConstruct().reference_objective({"coords": coords})
    knapsack = {"weights": np.ones(3), "values": np.ones(3), "capacity": 2.0}
    with pytest.raises(MissingExtra, match=r"needs ortools: pip install -e '\.\[references\]' -c constraints\.txt$"):
        KPConstruct().reference_objective(knapsack)


@pytest.mark.parametrize("module", ["coevo.llm.dspy_lm", "coevo.operators.dspy_rewriter"])
def test_the_dspy_modules_without_dspy_name_the_extra(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _uninstall(monkeypatch, "dspy")
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(MissingExtra, match=r"needs dspy: pip install -e '\.\[dspy\]' -c constraints\.txt$"):
        importlib.import_module(module)


def test_a_package_that_is_there_but_broken_keeps_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "half_installed.py").write_text("import its_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="its_missing_dependency") as info:
        require("half_installed", "some-extra", "this feature")
    assert not isinstance(info.value, MissingExtra)
