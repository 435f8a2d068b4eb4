"""Recognise the same heuristic written twice.

Small models often return a parent back with new comments, new formatting or renamed variables; such
copies would waste an evaluation. The fingerprint hashes the AST after removing what cannot change
behaviour: comments (gone in the AST), docstrings, annotations, and the names of everything the code
itself defines (parameters, locals, its own functions and constants), which are replaced by their order
of first appearance. Imported modules, attributes, builtins and all constants stay, so different
logic or different parameter values give different fingerprints.
"""

from __future__ import annotations

import ast
import hashlib

from coevo import pyast


def code_fingerprint(code: str) -> str:
    """SHA-256 of the normalised AST; raises ValueError (one line) if the code does not parse."""
    try:
        tree = pyast.parse(code)
    except SyntaxError as error:
        raise ValueError(f"cannot fingerprint code that does not parse: {pyast.unparsable_reason(error)}") from None
    normalised = _CanonicalNames(_defined_names(tree)).visit(_strip_docs_and_annotations(tree))
    return hashlib.sha256(ast.dump(normalised, annotate_fields=False).encode()).hexdigest()


def _defined_names(tree: ast.Module) -> set[str]:
    """Names the code binds itself (never imports): these are the ones a rewrite may rename freely."""
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
    return defined - imported


def _strip_docs_and_annotations(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            first = body[0].value if body and isinstance(body[0], ast.Expr) else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                node.body = body[1:] or [ast.Pass()]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        elif isinstance(node, ast.arg):
            node.annotation = None
    return tree


class _CanonicalNames(ast.NodeTransformer):
    """Renames defined names to n0, n1, ... in order of first appearance (source order)."""

    def __init__(self, defined: set[str]) -> None:
        self._defined = defined
        self._canonical: dict[str, str] = {}

    def _rename(self, name: str) -> str:
        if name not in self._defined:
            return name
        return self._canonical.setdefault(name, f"n{len(self._canonical)}")

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._rename(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self._rename(node.arg)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self._rename(node.name)
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        node.name = self._rename(node.name)
        self.generic_visit(node)
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.keyword:
        if node.arg is not None:
            node.arg = self._rename(node.arg)
        self.generic_visit(node)
        return node

    def visit_Global(self, node: ast.Global) -> ast.Global:
        node.names = [self._rename(name) for name in node.names]
        return node

    visit_Nonlocal = visit_Global  # type: ignore[assignment]
