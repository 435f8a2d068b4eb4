"""Pull a one-sentence thought and one Python function out of an LLM's answer.

Small models wrap code in every fence style, add prose around it, write helpers, misname the function
or put it in a class. The parser repairs what has one sensible reading and rejects the rest with a
one-line reason; it never raises on model output. The pipeline:

1. split the answer into code blocks (fenced, or the unfenced tail that starts at the first code line)
   and prose;
2. parse each block, dropping column-0 prose lines only if the block does not parse as it is;
3. pick the target function (by name; else the only function, renamed if its arity fits), keep the
   helpers, constants and imports it reaches, add well-known imports it uses but lacks;
4. check arity and that it returns a value, then render the code (original text where untouched).
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

from coevo import pyast

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+-]*)[^\n]*$", re.MULTILINE)
_CODE_START = re.compile(
    r"(?m)^[ \t]*(?:(?:async[ \t]+)?def[ \t]+\w|class[ \t]+\w|import[ \t]+\w|from[ \t]+[\w.]+[ \t]+import\b|@\w|"
    r"\w+[ \t]*=[ \t]*lambda\b)"
)
_BRACED = re.compile(r"\{([^{}]*[A-Za-z][^{}]*)\}", re.DOTALL)
_LABELLED = re.compile(
    r"^\W*(?:thought|idea|algorithm|description)[\w ]{0,20}?[:\uff1a]\s*(.+)$", re.IGNORECASE | re.MULTILINE
)
_MARKDOWN_NOISE = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+|#+\s+|>\s+)|[*`]+|__", re.MULTILINE)
_CONTINUATION_KEYWORDS = ("else", "elif", "except", "finally", "case")
_PYTHON_LANGUAGES = {"", "python", "python3", "py", "py3"}
_MAX_THOUGHT_CHARS = 600

KNOWN_IMPORTS: dict[str, str] = {
    "np": "import numpy as np",
    "numpy": "import numpy",
    "math": "import math",
    "random": "import random",
    "heapq": "import heapq",
    "itertools": "import itertools",
    "collections": "import collections",
    **{name: f"from typing import {name}" for name in ("Any", "Dict", "List", "Optional", "Sequence", "Set", "Tuple")},
}
"""Names small models use without importing, and the import that makes each one work."""

_BUILTIN_NAMES = frozenset(dir(builtins))


@dataclass(frozen=True)
class FunctionSpec:
    """The function a task asks for: its name and positional parameters."""

    name: str
    params: tuple[str, ...]
    header: str
    """The signature as prompts show it, starting with `def`."""
    provided: frozenset[str] = frozenset()
    """Names the code may use without defining them: the task puts them around it (a program task's
    fixed part, `tasks.Task.provided_names`)."""

    @classmethod
    def from_signature(cls, signature: str, provided: frozenset[str] = frozenset()) -> FunctionSpec:
        """Read `[def ]name(a, b: T, ...) [-> R][:]`; the return annotation may be informal prose."""
        header = signature.strip().removeprefix("def ").rstrip(":").strip()
        for candidate in (header, header.split("->", 1)[0].strip()):
            try:
                tree = pyast.parse(f"def {candidate}: pass")
            except SyntaxError:
                continue
            function = tree.body[0]
            assert isinstance(function, ast.FunctionDef)
            params = tuple(arg.arg for arg in function.args.posonlyargs + function.args.args)
            return cls(function.name, params, f"def {header}", provided)
        raise ValueError(f"cannot read function signature {signature!r}")


@dataclass(frozen=True)
class ParsedCode:
    thought: str
    code: str
    repairs: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParseFailure:
    reason: str


@dataclass(frozen=True)
class _Block:
    text: str
    cut_off: bool
    """Opened by a fence that never closes."""


@dataclass
class _Definition:
    """One top-level statement of the answer, with the text it will be rendered from."""

    node: ast.stmt
    source: str | None
    """Original text, or None when the node was transformed and must be unparsed."""
    defines: frozenset[str]


def parse_heuristic(text: str, spec: FunctionSpec, truncated: bool = False) -> ParsedCode | ParseFailure:
    """Thought and code of `spec`'s function from an LLM answer, or the reason there is none.

    `truncated` says the answer hit the token limit: an unclosed code fence then means cut-off code.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    blocks, prose = _split_blocks(text)
    if not blocks:
        return ParseFailure("no Python code found in the answer")
    repairs: list[str] = []
    definitions: list[_Definition] = []
    errors: list[str] = []
    target_errors: list[str] = []
    for block in blocks:
        if truncated and block.cut_off and _mentions_function(block.text, spec.name):
            return ParseFailure("the answer hit the token limit before the code ended")
        parsed = _parse_block(block.text, spec.name, prose, repairs)
        if isinstance(parsed, str):
            (target_errors if _mentions_function(block.text, spec.name) else errors).append(parsed)
        else:
            definitions.extend(parsed)
    target = _choose_target(definitions, spec, repairs)
    if isinstance(target, str):
        if target_errors:  # the function was written but is broken: that is the real reason
            return ParseFailure(target_errors[0])
        return ParseFailure(errors[0] if errors and not definitions else target)
    code = _assemble(definitions, target, repairs, spec.provided)
    if isinstance(code, ParseFailure):
        return code
    thought = _thought(prose, target.node)
    return ParsedCode(thought=thought, code=code, repairs=tuple(repairs))


def _split_blocks(text: str) -> tuple[list[_Block], list[str]]:
    """Code blocks (fenced, or the unfenced tail from the first code-looking line) and prose pieces."""
    fences = list(_FENCE.finditer(text))
    blocks: list[_Block] = []
    prose: list[str] = []
    position = 0
    index = 0
    while index < len(fences):
        opening = fences[index]
        closing = next((f for f in fences[index + 1 :] if f.group(1)[0] == opening.group(1)[0]), None)
        end = closing.start() if closing else len(text)
        body = text[opening.end() : end].strip("\n")
        prose.append(text[position : opening.start()])
        if opening.group(2).lower() in _PYTHON_LANGUAGES:
            blocks.append(_Block(textwrap.dedent(body), cut_off=closing is None))
        else:
            prose.append(body)
        if closing is None:
            position = len(text)
            break
        position = closing.end()
        index = fences.index(closing) + 1
    prose.append(text[position:])
    if any(_CODE_START.search(block.text) for block in blocks):
        return blocks, prose
    # No fenced code: the code is unfenced, perhaps next to a stray fence (which a prose filter drops).
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return [], [text]
    return [_Block(textwrap.dedent("\n".join(lines[start:])), cut_off=False)], ["\n".join(lines[:start])]


def _mentions_function(code: str, name: str) -> bool:
    return re.search(rf"\bdef\s+{re.escape(name)}\s*\(", code) is not None


def _parse_block(code: str, name: str, prose: list[str], repairs: list[str]) -> list[_Definition] | str:
    """Top-level definitions of one block, or why it does not parse; lines before its first code line
    (a thought written inside the fence) are moved to `prose`."""
    lines = code.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), 0)
    if start:
        prose.append("\n".join(lines[:start]))
        code = "\n".join(lines[start:])
    tree, code, error = _parse_repairing(code, repairs)
    if tree is None:
        where = f"the code for {name}" if _mentions_function(code, name) else "a code block"
        return f"{where} does not parse: {error}"
    return [definition for node in tree.body if (definition := _definition(node, code, repairs))]


def _parse_repairing(code: str, repairs: list[str]) -> tuple[ast.Module | None, str, str]:
    """Parse as is; then with tabs expanded; then without column-0 prose lines. Returns the first error."""
    first_error = ""
    attempts = [(code, None), (code.expandtabs(4), "expanded tabs")]
    kept = [line for line in code.expandtabs(4).split("\n") if not _is_prose_line(line)]
    dropped = code.count("\n") + 1 - len(kept)
    if dropped:
        attempts.append(("\n".join(kept), f"dropped {dropped} prose line(s) between code lines"))
    for attempt, repair in attempts:
        try:
            tree = pyast.parse(attempt)
        except SyntaxError as error:
            first_error = first_error or f"line {error.lineno}: {error.msg}"
            continue
        if repair:
            repairs.append(repair)
        return tree, attempt, ""
    return None, code, first_error


def _is_prose_line(line: str) -> bool:
    """A column-0 line that cannot start Python code, or is a lone word or `Label: text`."""
    if not line.strip() or line[0].isspace() or line.startswith("#"):
        return False
    if line.split()[0].rstrip(":") in _CONTINUATION_KEYWORDS or line[0] in ")]}":
        return False
    for completion in ("", "\n    pass", "\ndef _(): pass"):  # a block header, a decorator
        try:
            tree = pyast.parse(line + completion)
            break
        except SyntaxError:
            continue
    else:
        return True
    only = tree.body[0] if len(tree.body) == 1 else None
    lone_label = isinstance(only, ast.AnnAssign) and only.value is None
    lone_word = isinstance(only, ast.Expr) and isinstance(only.value, ast.Name)
    return lone_label or lone_word


def _definition(node: ast.stmt, code: str, repairs: list[str]) -> _Definition | None:
    """Keep imports, functions, classes and constant assignments; drop stray statements (example calls)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = frozenset((alias.asname or alias.name).split(".")[0] for alias in node.names)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names = frozenset({node.name})
    elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        if isinstance(node.value, ast.Lambda) and len(node.targets) == 1:
            name = node.targets[0].id
            repairs.append(f"turned the lambda {name} into a def")
            return _Definition(_lambda_to_def(name, node.value, node), None, frozenset({name}))
        names = frozenset(t.id for t in node.targets if isinstance(t, ast.Name))
    else:
        return None
    return _Definition(node, _source(node, code), names)


def _source(node: ast.stmt, code: str) -> str:
    lines = code.split("\n")
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n".join(lines[first - 1 : node.end_lineno])


def _lambda_to_def(name: str, function: ast.Lambda, origin: ast.stmt) -> ast.FunctionDef:
    fields = {"name": name, "args": function.args, "body": [ast.Return(function.body)], "decorator_list": []}
    if "type_params" in ast.FunctionDef._fields:
        fields["type_params"] = []
    definition = ast.FunctionDef(**fields)
    return ast.fix_missing_locations(ast.copy_location(definition, origin))


def _choose_target(definitions: list[_Definition], spec: FunctionSpec, repairs: list[str]) -> _Definition | str:
    """The definition that becomes `spec.name`, transformed in place if needed, or why there is none."""
    functions = [d for d in definitions if isinstance(d.node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    named = [d for d in functions if d.node.name == spec.name]
    if named:
        return _check_function(named[-1], spec)
    methods = [
        (d.node.name, method)
        for d in definitions
        if isinstance(d.node, ast.ClassDef)
        for method in d.node.body
        if isinstance(method, ast.FunctionDef) and not method.name.startswith("__")
    ]
    named_methods = [(owner, m) for owner, m in methods if m.name == spec.name]
    if named_methods or (not functions and len(methods) == 1):
        owner, method = (named_methods or methods)[-1]
        extracted = _from_method(method, spec)
        if isinstance(extracted, str):
            return extracted
        repairs.append(f"took {method.name} out of class {owner}")
        return _rename(_Definition(extracted, None, frozenset({method.name})), spec, repairs)
    if not functions:
        return "the answer defines no function"
    if len(functions) > 1:
        found = ", ".join(sorted({d.node.name for d in functions}))
        return f"no function named {spec.name} (found {found})"
    return _rename(functions[0], spec, repairs)


def _rename(definition: _Definition, spec: FunctionSpec, repairs: list[str]) -> _Definition | str:
    """Give the only function the task's name, if it takes the task's arguments."""
    old = definition.node.name
    problem = _arity_problem(definition.node, spec)
    if problem:
        return f"no function named {spec.name}, and the only function {old} {problem}"
    if old != spec.name:
        definition.node.name = spec.name
        definition.source = None
        definition.defines = frozenset({spec.name})
        repairs.append(f"renamed {old} to {spec.name}")
    return definition


def _from_method(method: ast.FunctionDef, spec: FunctionSpec) -> ast.FunctionDef | str:
    """A copy of a method as a plain function: decorators like @staticmethod and a leading self go."""
    function = ast.FunctionDef(**{field: getattr(method, field) for field in method._fields})
    function.decorator_list = []
    arguments = function.args.posonlyargs + function.args.args
    if arguments and arguments[0].arg in ("self", "cls") and len(arguments) == len(spec.params) + 1:
        if any(isinstance(n, ast.Name) and n.id == arguments[0].arg for n in ast.walk(method)):
            return f"{method.name} is a method that uses {arguments[0].arg}; write a plain function"
        function.args = ast.arguments(**{field: getattr(method.args, field) for field in method.args._fields})
        if function.args.posonlyargs:
            function.args.posonlyargs = function.args.posonlyargs[1:]
        else:
            function.args.args = function.args.args[1:]
    return ast.fix_missing_locations(ast.copy_location(function, method))


def _check_function(definition: _Definition, spec: FunctionSpec) -> _Definition | str:
    problem = _arity_problem(definition.node, spec)
    return f"{spec.name} {problem}" if problem else definition


def _arity_problem(function: ast.FunctionDef | ast.AsyncFunctionDef, spec: FunctionSpec) -> str | None:
    """Why `function` cannot be called with the spec's positional arguments, or None."""
    if isinstance(function, ast.AsyncFunctionDef):
        return "is async; the task calls it synchronously"
    args = function.args
    positional = len(args.posonlyargs) + len(args.args)
    required = positional - len(args.defaults)
    wanted = len(spec.params)
    if required > wanted or (positional < wanted and args.vararg is None):
        expected = ", ".join(spec.params)
        return f"takes {positional} positional parameter(s) but is called with {wanted} ({expected})"
    if any(default is None for default in args.kw_defaults):
        return "has keyword-only parameters without defaults"
    return None


def _assemble(
    definitions: list[_Definition], target: _Definition, repairs: list[str], provided: frozenset[str]
) -> str | ParseFailure:
    """Render the target with what it reaches, in source order, plus the imports it lacks (but not
    the `provided` names, which the task puts around the code)."""
    if not _returns_value(target.node):
        return ParseFailure(f"{target.node.name} never returns a value")
    latest: dict[str, _Definition] = {}
    for definition in definitions:
        if not isinstance(definition.node, (ast.Import, ast.ImportFrom)):
            latest.update(dict.fromkeys(definition.defines, definition))
    latest[target.node.name] = target
    kept = _reachable(target, latest)
    imports = [
        d
        for d in definitions
        if isinstance(d.node, (ast.Import, ast.ImportFrom))
        and (d.defines & _loaded_names(k.node for k in kept) or any(a.name == "*" for a in d.node.names))
    ]
    body = [d for d in definitions if d in kept and d is not target]
    nodes = [d.node for d in imports + body] + [target.node]
    free = _free_names(nodes) - provided
    added = [KNOWN_IMPORTS[name] for name in sorted(free) if name in KNOWN_IMPORTS]
    repairs.extend(f"added `{line}`" for line in added)
    if undefined := sorted(free - set(KNOWN_IMPORTS)):
        return ParseFailure(f"{target.node.name} uses undefined name(s): {', '.join(undefined)}")
    rendered = list(dict.fromkeys(added + [_render(d) for d in imports])) + [_render(d) for d in body + [target]]
    imports_end = len(dict.fromkeys(added + [_render(d) for d in imports]))
    head, tail = "\n".join(rendered[:imports_end]), "\n\n\n".join(rendered[imports_end:])
    return f"{head}\n\n\n{tail}\n" if head else f"{tail}\n"


def _render(definition: _Definition) -> str:
    return definition.source if definition.source is not None else ast.unparse(definition.node)


def _reachable(target: _Definition, by_name: dict[str, _Definition]) -> list[_Definition]:
    """Definitions the target reaches through the names it loads, transitively."""
    kept = [target]
    frontier = [target]
    while frontier:
        current = frontier.pop()
        for name in _loaded_names([current.node]):
            found = by_name.get(name)
            if found is not None and all(found is not k for k in kept):
                kept.append(found)
                frontier.append(found)
    return kept


def _loaded_names(nodes: Iterable[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _bound_names(nodes: Iterable[ast.AST]) -> set[str]:
    """Every name bound anywhere (a flat over-approximation of scopes: good enough to find missing imports)."""
    bound: set[str] = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                bound.add(n.id)
            elif isinstance(n, ast.arg):
                bound.add(n.arg)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".")[0] for a in n.names)
            elif isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name:
                bound.add(n.name)
            elif isinstance(n, ast.MatchMapping) and n.rest:
                bound.add(n.rest)
    return bound


def _free_names(nodes: list[ast.stmt]) -> set[str]:
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in nodes):
        return set()
    return _loaded_names(nodes) - _bound_names(nodes) - _BUILTIN_NAMES


def _returns_value(function: ast.FunctionDef) -> bool:
    """True if the function's own body (not nested functions) has `return <value>` or yields."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return) and node.value is not None or isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    return False


def _thought(prose: list[str], function: ast.FunctionDef) -> str:
    """EoH's braced sentence; else a `Thought:` line; else the docstring; else the first prose paragraph."""
    text = "\n".join(prose)
    braced = [m.group(1) for m in _BRACED.finditer(text) if len(m.group(1).split()) >= 3]
    labelled = [m.group(1) for m in _LABELLED.finditer(text)]
    docstring = ast.get_docstring(function) or ""
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    for found in (braced, labelled, [docstring], paragraphs[:1]):
        if found and found[0].strip():
            return _one_line(found[0])
    return ""


def _one_line(text: str) -> str:
    cleaned = " ".join(_MARKDOWN_NOISE.sub("", text).split())
    return cleaned.strip(" {}")[:_MAX_THOUGHT_CHARS]
