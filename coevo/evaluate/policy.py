"""What candidate code may use, and the static check that enforces it before anything runs.

The static check is the first of three layers (then restricted builtins, then an audit hook in
the sandboxed child). Its job is to reject the obvious escapes early, with a reason precise enough
to feed back to the LLM that wrote the code ("import of 'os' is not allowed", not "crashed").
"""

from __future__ import annotations

import ast
import re
import string

from coevo import pyast

PRELOADED_MODULES: tuple[str, ...] = (
    "numpy",
    "numpy.random",
    "numpy.linalg",
    "numpy.fft",
    "numpy.polynomial",
    "math",
    "cmath",
    "random",
    "itertools",
    "heapq",
    "collections",
    "collections.abc",
    "functools",
    "typing",
    "dataclasses",
    "statistics",
    "bisect",
    "operator",
    "copy",
    "fractions",
    "decimal",
    "numbers",
    "array",
    "string",
    "enum",
    "abc",
    "time",
)
"""Modules imported by the fork server, so a sandboxed child never needs to read a file to import."""

ALLOWED_MODULES: frozenset[str] = frozenset(name.partition(".")[0] for name in PRELOADED_MODULES)
"""Top-level modules a candidate may import: exactly those the fork server has loaded."""

FORBIDDEN_NAMES: frozenset[str] = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "open",
        "input",
        "breakpoint",
        "globals",
        "locals",
        "vars",
        "dir",
        "help",
        "exit",
        "quit",
        "memoryview",
    }
)
"""Builtins that read code or files, or expose namespaces; none is needed by a heuristic.
Dunder names (``__import__``, ``__builtins__``) are refused by a separate, general rule."""

INTROSPECTION_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "f_trace",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "ag_code",
        "tb_frame",
        "tb_next",
        "func_globals",
        "mro",
    }
)
"""Attributes that walk frames, tracebacks or class hierarchies towards the evaluator's objects."""

_UNREACHABLE_MODULES = frozenset(
    {
        "os",
        "sys",
        "subprocess",
        "builtins",
        "importlib",
        "ctypes",
        "socket",
        "shutil",
        "signal",
        "io",
        "pathlib",
        "gc",
        "inspect",
        "pickle",
        "marshal",
        "threading",
        "multiprocessing",
        "tempfile",
        "resource",
        "posix",
        "mmap",
        "types",
        "weakref",
        "runpy",
        "pty",
        "glob",
        "bltns",  # enum's alias of builtins
        "contextlib",
        "warnings",
        "ctypeslib",
        "as_strided",  # numpy's unchecked strides: a view of raw memory
    }
)
"""Names that, used as an attribute (``np.lib.format.os``), reach past the import check: modules
outside the allowed ones, and numpy's routes to raw memory."""

REFUSED_HELPERS: dict[str, str] = {
    **dict.fromkeys(
        ("namedtuple", "dataclass", "make_dataclass", "NamedTuple"),
        "generates code at run time, which the sandbox refuses; use a tuple or a plain class",
    ),
    "Formatter": "resolves format fields to objects, which the sandbox refuses; use str.format",
}
"""Standard-library helpers a candidate may not name, and why: they compile source text at run
time, or hand out the objects that format fields name."""

ALLOWED_DUNDER_METHODS: frozenset[str] = frozenset(
    {
        "__init__", "__post_init__", "__repr__", "__str__", "__hash__", "__bool__", "__len__",
        "__iter__", "__next__", "__reversed__", "__contains__", "__getitem__", "__setitem__", "__delitem__",
        "__call__", "__enter__", "__exit__",
        "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
        "__neg__", "__pos__", "__abs__", "__int__", "__float__", "__index__", "__round__",
        "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__",
        "__imul__", "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__", "__rfloordiv__",
        "__mod__", "__rmod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__",
        "__and__", "__or__", "__xor__", "__invert__", "__lshift__", "__rshift__",
    }
)  # fmt: skip
"""Special methods a candidate's class may define: arithmetic, comparison, containers. Hooks into
attribute lookup, descriptors, class creation, pickling and numpy's buffer protocols are not."""

CLASS_BODY_NAMES: frozenset[str] = frozenset(
    {"__module__", "__qualname__", "__doc__", "__annotations__", "__classcell__", "__orig_bases__"}
)
"""Special names that Python itself puts into a class statement's namespace."""

_DUNDER = re.compile(r"^__\w+__$")
_ALLOWED_DUNDER_NAMES = frozenset({"__name__"})


class RejectedCode(Exception):
    """The candidate breaks the policy; the message is the precise, user-facing reason."""


def module_allowed(name: str) -> bool:
    """True when a dotted module name lies inside an allowed top-level package, and not in one of
    its parts that reach past it (``numpy.ctypeslib``)."""
    top, *parts = name.split(".")
    return top in ALLOWED_MODULES and not any(part in _UNREACHABLE_MODULES for part in parts)


def attribute_allowed(name: str) -> bool:
    """True when ``obj.name`` cannot reach private state, introspection, or a forbidden module."""
    return not (name.startswith("_") or name in INTROSPECTION_ATTRIBUTES or name in _UNREACHABLE_MODULES)


def class_attribute_allowed(name: str) -> bool:
    """True when a class built at run time (``type(name, bases, namespace)``, a metaclass, the
    functional Enum API) may hold ``name``: the special names a class statement may define, no
    other (``__instancecheck__``, ``__match_args__``, ``__array_interface__``...)."""
    special = len(name) > 4 and name.startswith("__") and name.endswith("__")
    return not special or name in ALLOWED_DUNDER_METHODS or name in CLASS_BODY_NAMES


def format_fields(text: str) -> list[str]:
    """The replacement fields of ``text`` read as a ``str.format`` template ([] if it is not one)."""
    try:
        return [field for _, field, _, _ in string.Formatter().parse(text) if field]
    except ValueError:
        return []


def check_code(code: str, function_name: str) -> None:
    """Parse the candidate and raise RejectedCode on the first policy breach (with its line)."""
    try:
        tree = pyast.parse(code, filename="<candidate>")
    except (SyntaxError, ValueError) as error:  # ValueError: NUL bytes, lone surrogates
        raise RejectedCode(pyast.unparsable_reason(error)) from None
    module_aliases = _imported_names(tree)
    for node in ast.walk(tree):
        problem = _node_problem(node, module_aliases)
        if problem:
            raise RejectedCode(f"{problem} (line {getattr(node, 'lineno', '?')})")
    if not any(isinstance(node, ast.FunctionDef) and node.name == function_name for node in tree.body):
        raise RejectedCode(f"no top-level function named {function_name!r} is defined")


def _imported_names(tree: ast.Module) -> frozenset[str]:
    """Local names bound by import statements (candidates for monkeypatching checks)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return frozenset(names)


def _node_problem(node: ast.AST, module_aliases: frozenset[str]) -> str | None:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return _import_problem(node)
    if isinstance(node, ast.MatchClass):
        refused = [name for name in node.kwd_attrs if not attribute_allowed(name)]
        return f"matching on attribute {refused[0]!r} is not allowed" if refused else None
    if isinstance(node, ast.FunctionDef) and _DUNDER.match(node.name) and node.name not in ALLOWED_DUNDER_METHODS:
        return f"defining the special method {node.name!r} is not allowed"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _string_problem(node.value)
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    if name in REFUSED_HELPERS:
        return f"{name} {REFUSED_HELPERS[name]}"
    if isinstance(node, ast.Name):
        if node.id in FORBIDDEN_NAMES:
            return f"use of {node.id!r} is not allowed"
        if _DUNDER.match(node.id) and node.id not in _ALLOWED_DUNDER_NAMES:
            return f"use of dunder name {node.id!r} is not allowed"
    elif isinstance(node, ast.Attribute):
        if not attribute_allowed(node.attr):
            return f"access to attribute {node.attr!r} is not allowed"
        if isinstance(node.ctx, (ast.Store, ast.Del)) and _root_name(node) in module_aliases:
            return f"modifying module {_root_name(node)!r} (monkeypatching) is not allowed"
    elif isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)):
        return "async code is not allowed"
    return None


def _import_problem(node: ast.Import | ast.ImportFrom) -> str | None:
    if isinstance(node, ast.ImportFrom) and node.level:
        return "relative imports are not allowed"
    modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names]
    for module in modules:
        if not module_allowed(module) or not all(attribute_allowed(part) for part in module.split(".")[1:]):
            return f"import of {module!r} is not allowed"
    for alias in node.names:
        if isinstance(node, ast.ImportFrom) and alias.name != "*" and not attribute_allowed(alias.name):
            return f"importing {alias.name!r} from {node.module!r} is not allowed"
        if isinstance(node, ast.ImportFrom) and alias.name in REFUSED_HELPERS:
            return f"{alias.name} {REFUSED_HELPERS[alias.name]}"
        if alias.asname and _DUNDER.match(alias.asname):
            return f"importing as the dunder name {alias.asname!r} is not allowed"
    return None


def _string_problem(text: str) -> str | None:
    if _DUNDER.match(text):
        return f"string {text!r} names a dunder attribute, which is not allowed"
    for field in format_fields(text):
        if "." in field or "[" in field:
            return f"format field {{{field}}} reaches into an object, which is not allowed"
    return None


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None
