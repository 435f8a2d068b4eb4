"""What an evaluator may not do, found in its source before anything runs.

The evaluator runs in a trusted driver process that has no files, and the program runs only in
the sandbox: an evaluator that unpickles (a pickle the program wrote would run code in the trusted
process), starts a process (to run the program itself) or exchanges files with the program
(temporary files; a file a function opens by the path it was given, such as the program's own)
cannot work there. Each is refused in one line naming the first place it happens. A file opened
by a path of the evaluator's own making (its data, its config) is not refused: read at the top of
the evaluator it works, as the evaluator loads before the driver loses its files.
"""

from __future__ import annotations

import ast

from coevo import pyast

UNPICKLING_MODULES = frozenset({"pickle", "_pickle", "cPickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"})
PROCESS_MODULES = frozenset({"subprocess", "multiprocessing", "pty", "pexpect"})
PROCESS_CALLS = frozenset({"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "startfile"})
"""Functions of ``os`` that start a process (with the ``exec*`` and ``spawn*`` families)."""
FILE_MODULES = frozenset({"tempfile"})
FILE_METHODS = frozenset({"open", "read_text", "read_bytes", "write_text", "write_bytes"})
"""Calls that open a file (``open``, ``io.open``, ``Path.read_text``...)."""
_WHY = {
    "unpickles": "it unpickles ({}), and a pickle the program wrote would run code in the trusted process",
    "process": "it starts a process ({}) to run the program outside coevo's sandbox",
    "files": "it exchanges files with the program ({}), but it runs in a process that has none",
}


def refusal(source: str, where: str) -> str | None:
    """Why the evaluator ``source`` (the file ``where``) cannot run under coevo, or None."""
    try:
        tree = pyast.parse(source, filename=where)
    except (SyntaxError, ValueError) as error:
        return f"{where} does not parse: {pyast.unparsable_reason(error)}"
    found: dict[str, tuple[int, str]] = {}
    for kind, node, what in _uses(tree):
        place = (node.lineno, f"{what}, line {node.lineno}")
        found[kind] = min(found.get(kind, place), place)
    if not found:
        return None
    reasons = "; ".join(why.format(found[kind][1]) for kind, why in _WHY.items() if kind in found)
    return f"{where} cannot run under coevo: {reasons}; an evaluator may only call the program's functions, which coevo runs in its sandbox"


def _uses(tree: ast.Module) -> list[tuple[str, ast.AST, str]]:
    """(kind, node, what it is) for every refused use: imports anywhere, and file calls on a path a
    function was given."""
    uses = []
    for node in ast.walk(tree):
        for module in _imported_modules(node):
            kind = next((k for k, names in _MODULE_KINDS if module in names), None)
            if kind is not None:
                uses.append((kind, node, f"import {module}"))
        if isinstance(node, ast.Attribute) and _starts_process(node):
            uses.append(("process", node, f"os.{node.attr}"))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            given = {arg.arg for arg in ast.walk(node.args) if isinstance(arg, ast.arg)}
            for call in ast.walk(node):
                what = _opened_file(call)
                if what is not None and _names(call) & given:
                    uses.append(("files", call, what))
    return uses


def _names(call: ast.Call) -> set[str]:
    """The names a call's arguments (and, for a method, its object) read."""
    parts = [*call.args, *(keyword.value for keyword in call.keywords)]
    if isinstance(call.func, ast.Attribute):
        parts.append(call.func.value)
    return {n.id for part in parts for n in ast.walk(part) if isinstance(n, ast.Name)}


_MODULE_KINDS = (("unpickles", UNPICKLING_MODULES), ("process", PROCESS_MODULES), ("files", FILE_MODULES))


def _imported_modules(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.partition(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module.partition(".")[0]]
    return []


def _starts_process(node: ast.Attribute) -> bool:
    """``os.system``, ``os.execv``, ``os.spawnl``... (by the attribute of a name ``os``)."""
    if not (isinstance(node.value, ast.Name) and node.value.id == "os"):
        return False
    return node.attr in PROCESS_CALLS or node.attr.startswith(("exec", "spawn"))


def _opened_file(node: ast.AST) -> str | None:
    """``open`` or ``x.read_text``... when ``node`` is a call of one, else None."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name) and node.func.id == "open":
        return "open"
    if isinstance(node.func, ast.Attribute) and node.func.attr in FILE_METHODS:
        return f".{node.func.attr}"
    return None
