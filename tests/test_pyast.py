"""coevo.pyast.parse must survive several threads parsing at once, switching in the middle of a parse."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from coevo import pyast

DEEP_CODE = "def f(a, b, c):\n" + "".join(
    f"    x{i} = min(a[b, c] * {i}.5 + (b - (c * (a + {i}))), b)\n" for i in range(200)
) + "    return x1\n"


def _parse_from_threads(parse, threads: int = 4, rounds: int = 40) -> list[BaseException]:
    """Parse DEEP_CODE concurrently while a gc callback keeps handing the GIL to other threads."""
    errors: list[BaseException] = []

    def work() -> None:
        for _ in range(rounds):
            try:
                parse(DEEP_CODE)
            except SystemError as error:
                errors.append(error)

    def busy_callback(*_args) -> None:
        sum(range(50))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    gc.callbacks.append(busy_callback)
    try:
        workers = [threading.Thread(target=work) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        gc.callbacks.remove(busy_callback)
        sys.setswitchinterval(interval)
    return errors


def test_concurrent_parses_all_succeed() -> None:
    assert _parse_from_threads(pyast.parse) == []


def test_parse_returns_the_module_and_reports_syntax_errors() -> None:
    tree = pyast.parse("def g(x):\n    return x + 1\n")
    assert tree.body[0].name == "g"
    with pytest.raises(SyntaxError) as error:
        pyast.parse("def g(:\n")
    assert error.value.lineno == 1
