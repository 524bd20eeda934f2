"""Lines of code of a Python file, the measure of issue 28's "at most 30 lines per adapter".

The rule: a line counts when it holds a token of code, so blank lines, comment lines and
docstrings (the first string statement of a module, class or function) do not; a statement
over three lines is three lines. The module-level assignments of the field table's
metadata (`PACKAGE`, `CONFIGURATIONS`, `NOT_EXPRESSIBLE`: what `infonce_sim.field` reads,
not what runs a case) are counted apart, as `metadata`.
"""

import ast
import io
import pathlib
import tokenize
from typing import NamedTuple

METADATA_NAMES = frozenset({"PACKAGE", "CONFIGURATIONS", "NOT_EXPRESSIBLE"})
_NOT_CODE = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                       tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER})


class LineCount(NamedTuple):
    code: int  # lines of code, the metadata's excluded
    metadata: int  # lines of the metadata's module-level assignments


def count_source(text: str) -> LineCount:
    """The lines of code of a module's source text (the module doc's rule)."""
    tree = ast.parse(text)
    code = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in _NOT_CODE:
            code.update(range(token.start[0], token.end[0] + 1))
    code -= _lines_of(_docstrings(tree))
    metadata = code & _lines_of(_metadata_assignments(tree))
    return LineCount(len(code - metadata), len(metadata))


def count_file(path: str | pathlib.Path) -> LineCount:
    return count_source(pathlib.Path(path).read_text(encoding="utf-8"))


def _docstrings(tree: ast.Module) -> list[ast.AST]:
    scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return [node.body[0] for node in ast.walk(tree)
            if isinstance(node, scopes) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)]


def _metadata_assignments(tree: ast.Module) -> list[ast.AST]:
    def names(node: ast.AST) -> list[str]:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    return [node for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
            and METADATA_NAMES.intersection(names(node))]


def _lines_of(nodes: list[ast.AST]) -> set[int]:
    return {line for node in nodes for line in range(node.lineno, node.end_lineno + 1)}
