"""Routes past the sandbox's Python and process layers that a hostile corpus found (issue 29).

The candidates that take these routes are in tests/hostile/ (``type_*``, ``enum_functional_*``,
``typing_get_origin_*``, ``attrgetter_class``, ``methodcaller_class``, ``wraps_partial_func``,
``str_subclass_name``) and tests/breach/ (``signal_by_file_owner``, ``host_paths``). Here: that
closing them leaves the ordinary uses working, that the audit hook holds once everything a
candidate could reach has been rewritten, and that no value of the evaluator's environment is
left in the memory of the fork server or a child.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from coevo.evaluate import Evaluator, Limits
from coevo.evaluate.guard import EXIT_VIOLATION
from coevo.evaluate.isolation import INHERITED_VARIABLES
from coevo.evaluate.policy import class_attribute_allowed
from coevo.evaluate.probe import ProbeTask

REPO = Path(__file__).resolve().parents[1]
LIMITS = Limits(instance_seconds=3.0, candidate_seconds=5.0, memory_mb=320)

ORDINARY = '''
import abc
import enum
import functools
import operator
import time

import numpy as np


class Base(abc.ABC):
    @abc.abstractmethod
    def weight(self, value):
        raise NotImplementedError


class Doubled(Base, metaclass=abc.ABCMeta):
    def weight(self, value):
        return 2 * value


class Size(enum.Enum):
    SMALL = 1


class Lazy:
    @functools.cached_property
    def twice(self):
        return [2]


Color = enum.Enum("Color", "RED GREEN")
Shade = enum.Enum("Shade", [("LIGHT", 1), ("DARK", 2)])
EQUAL = "_" * 2 + "eq" + "_" * 2  # a special method a class statement may define, so type() may too
Point = type("Point", (), {"x": 3, "norm": lambda self: abs(self.x), EQUAL: lambda self, other: True})


def logged(function):
    @functools.wraps(function)
    def wrapper(values):
        return function(values)

    return wrapper


@logged
def pick(values):
    assert type(values) is type(values.copy()) and type(Point()) is Point and Point().norm() == 3 and Point() == 1
    assert operator.attrgetter("real")(1) == 1 and operator.methodcaller("count", 1)([1, 2]) == 1
    assert type(operator.attrgetter("real")) is operator.attrgetter
    assert Color.GREEN.value == 2 and Shade.DARK.value == 2 and Size.SMALL.name == "SMALL"
    assert Doubled().weight(2) == 4 and getattr(Size.SMALL, "name") == "SMALL"
    lazy = Lazy()
    assert lazy.twice is lazy.twice and type(time.get_clock_info("time"))(a=1).a == 1
    assert isinstance(values, np.ndarray) and type(values) is np.ndarray and issubclass(type(values), np.ndarray)
    assert np.ndarray((1,), dtype=np.int64, buffer=np.ones(1, dtype=np.int64))[0] == 1
    assert np.ndarray((2,), dtype=object)[0] is None and np.recarray((1,), formats=["f8"]).shape == (1,)
    return int(values.argmin())
'''


def test_closing_the_routes_leaves_ordinary_classes_and_helpers_working() -> None:
    with Evaluator(ProbeTask(), limits=LIMITS, workers=1) as evaluator:
        result = evaluator.evaluate(ORDINARY)
    assert result.valid, result.reason


@pytest.mark.parametrize(
    ("name", "allowed"),
    [("weight", True), ("_helper", True), ("__init__", True), ("__module__", True), ("__qualname__", True),
     ("__instancecheck__", False), ("__match_args__", False), ("__array_interface__", False),
     ("__array_struct__", False), ("__getattribute__", False), ("__init_subclass__", False), ("__slots__", False)],
)  # fmt: skip
def test_a_class_built_at_run_time_may_hold_only_the_special_names_a_class_statement_may(
    name: str, allowed: bool
) -> None:
    assert class_attribute_allowed(name) is allowed


HOOK_ATTACK = """
import os
import sys

from coevo.evaluate import guard

module_code = compile("pass", "<candidate>", "exec")
armed = guard.Guard()
armed.arm(module_code, lambda reason: print(reason, flush=True))


class Inert:
    def __getattr__(self, name):
        return Inert()

    def __call__(self, *args, **kwargs):
        return ""


# What a candidate that reached the guard's objects would rewrite: the Guard's state, every
# global of the guard module, and os._exit itself.
for name in list(vars(armed)):
    setattr(armed, name, None)
for name in [name for name in vars(guard) if not name.startswith("__")]:
    setattr(guard, name, Inert())
os._exit = lambda code: None
print("escaped", compile("1", "<escape>", "eval"), flush=True)
"""


def test_the_audit_hook_holds_once_everything_reachable_is_rewritten() -> None:
    """The hook ends the process with the violation code whatever was rewritten around it."""
    done = subprocess.run([sys.executable, "-c", HOOK_ATTACK], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "escaped" not in done.stdout
    assert done.returncode == EXIT_VIOLATION, done.stderr
    assert "sandbox refused compile" in done.stdout


CLASS_PATCHES = """
import enum
import functools

import numpy

from coevo.evaluate.guard import Guard


def methods():
    return [vars(enum.EnumType)["_create_"], vars(functools.cached_property)["__get__"], vars(numpy.recarray)["__new__"]]


real = methods()
guard = Guard()
guard.patch_classes()
patched = methods()
guard.restore_classes()
restored = methods()
guard.patch_classes()
guard.arm(compile("pass", "<candidate>", "exec"), print)
armed = methods()
print(all(a is not b for a, b in zip(real, patched)), restored == real, armed == patched, flush=True)
"""


def test_the_checked_methods_are_put_in_place_once_and_the_real_ones_can_be_restored() -> None:
    """The fork server puts them in place before forking (its children inherit them, arming
    changes no class again); the trusted driver processes put the real ones back."""
    done = subprocess.run([sys.executable, "-c", CLASS_PATCHES], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "True", "True"], done.stderr


PLANTED = {
    "outside the allow-list": (
        "LANGCHAIN_API_KEY", "LANGSMITH_API_KEY", "LC_COEVO_TOKEN", "OMP_COEVO_TOKEN", "TZ_COEVO_TOKEN"
    ),
    "allowed, or once allowed": (*sorted(INHERITED_VARIABLES), "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ"),
}
"""Variables that an old prefix allow-list let through (``LANG``, ``LC_``, ``OMP_``...); and those
the fork server is started with, or was (the locale and the time zone, which the C library copies)."""


@pytest.fixture(params=list(PLANTED))
def secrets(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    values = {name: f"coevo-secret-{uuid.uuid4().hex}" for name in PLANTED[request.param]}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    yield values


def test_no_value_of_the_evaluators_environment_is_in_the_memory_of_the_fork_server_or_a_child(
    secrets: dict[str, str],
) -> None:
    """Read from outside: the fork server's whole memory and, where this test may read it (as root:
    it is not dumpable), one of its children's (every child inherits the same)."""
    with Evaluator(ProbeTask(), limits=LIMITS, workers=1) as evaluator:
        assert evaluator.evaluate(ProbeTask().seed_code()).valid  # the fork server is up, children forked
        server = evaluator.sandbox.server_pid
        assert psutil.Process(server).environ() == {}
        children = sorted(evaluator.sandbox.spare_pids())[-1:] if os.geteuid() == 0 else []
        memory = b"".join(_readable_memory(pid) for pid in (server, *children))
    found = [name for name, value in secrets.items() if value.encode() in memory]
    assert found == []


def _readable_memory(pid: int) -> bytes:
    """Every mapped region of ``pid`` that can be read, concatenated."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            span, permissions = line.split()[:2]
            if not permissions.startswith("r"):
                continue
            start, end = (int(address, 16) for address in span.split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except OSError:  # [vvar] and the like
                continue
    return b"\0".join(chunks)
