"""Code nobody calls, modules that only pass names along, and comments a formatter left on the wrong line fail
here: a name defined at the top of a module under src/ must be used somewhere (src, tests, tools, benchmarks,
pyproject), not only by other dead code; a comment belongs to the line it describes."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from pathlib import Path

from tests.conftest import parsed_source

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "offloaddoctor"
WORD = re.compile(r"\w+")


def _corpus(root: Path) -> dict[Path, str]:
    texts = {
        path: path.read_text(encoding="utf-8")
        for part in ("src", "tests", "tools", "benchmarks")
        for path in (root / part).rglob("*.py")
    }
    pyproject = root / "pyproject.toml"
    if pyproject.exists():
        texts[pyproject] = pyproject.read_text(encoding="utf-8")
    return texts


def _source_segment(lines: list[str], node: ast.stmt) -> str:
    """ast.get_source_segment(text, node) from the file's lines (it splits the whole file again on each call:
    4 of this test's 4.7 s). Offsets are in UTF-8 bytes, as there."""
    assert node.end_lineno is not None and node.end_col_offset is not None
    segment = lines[node.lineno - 1 : node.end_lineno]
    segment[-1] = segment[-1].encode()[: node.end_col_offset].decode()
    segment[0] = segment[0].encode()[node.col_offset :].decode()
    return "".join(segment)


def unused_definitions(root: Path = ROOT) -> list[str]:
    """Top-level functions and classes of the package whose name appears nowhere but in their own definition or
    in other unused definitions (found to a fixed point, so a helper only a dead function called is dead too).
    Decorated definitions are registered by their decorator (typer commands, fixtures) and count as used."""
    texts = _corpus(root)
    words = Counter(word for text in texts.values() for word in WORD.findall(text))
    definitions = []  # (where, name, the words of its own source)
    for path in sorted((root / "src" / "offloaddoctor").rglob("*.py")):
        text = texts[path]
        lines = io.StringIO(text, newline="").readlines()  # split as ast.get_source_segment splits, once a file
        for node in parsed_source(path).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.decorator_list:
                own = Counter(WORD.findall(_source_segment(lines, node)))
                definitions.append((f"{path.relative_to(root / 'src')}:{node.lineno}", node.name, own))
    dead: list[str] = []
    changed = True
    while changed:
        changed = False
        for where, name, own in definitions:
            label = f"{where} {name}"
            if label not in dead and words[name] - own[name] <= 0:
                dead.append(label)
                words -= own
                changed = True
    return sorted(dead)


def pure_reexports(package: Path = PACKAGE) -> list[str]:
    """Modules (not package __init__) whose body is only a docstring, imports and `__all__`: a second name for a
    module that importers should name directly."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        body = parsed_source(path).body
        docstring = (
            body[:1] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []
        )
        rest = body[len(docstring) :]
        is_all = lambda node: isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]  # noqa: E731
        if rest and all(isinstance(node, (ast.Import, ast.ImportFrom)) or is_all(node) for node in rest):
            found.append(str(path.relative_to(package)))
    return found


_CLOSERS = {")", "]", "}", ":"}


def stranded_comments(text: str) -> list[tuple[int, str]]:
    """Comments a formatter moved: one trailing a line that only closes brackets (`):  # why`, `)  # what` —
    it described the statement's first line, which the formatter split), and two comments run together on one
    line (`# one  # other`: a neighbour's comment joined on). A closer followed by a comma (`},  # Bridge`)
    ends one element of a literal, and its comment is about that element: it stays."""
    found = []
    on_line: dict[int, list[tokenize.TokenInfo]] = {}
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        if token.type != tokenize.COMMENT:
            on_line.setdefault(token.start[0], []).append(token)
            continue
        before = on_line.get(token.start[0], [])
        only_closes = bool(before) and all(t.type == tokenize.OP and t.string in _CLOSERS for t in before)
        if only_closes or "  # " in token.string:
            found.append((token.start[0], token.string))
    return found


def test_no_comment_is_stranded_on_the_wrong_line():
    problems = [
        f"{path.relative_to(ROOT)}:{line}: {comment}"
        for part in ("src", "tests", "tools", "benchmarks")
        for path in sorted((ROOT / part).rglob("*.py"))
        for line, comment in stranded_comments(path.read_text(encoding="utf-8"))
    ]
    assert problems == []


def test_the_comment_check_sees_what_a_formatter_does():
    text = (
        "if (\n    cond\n):  # why the branch\n    pass\n"
        "x = (\n    1024  # fine: it trails its value\n)\n"
        "files = field(\n    default_factory=list\n)  # every log file  # trigger's comment\n"
        "CASES = [\n    {\n        'a': 1,\n    },  # about this element: fine\n]\n"
        "url = '#not a comment  # either'\n"
    )
    assert stranded_comments(text) == [
        (3, "# why the branch"),
        (10, "# every log file  # trigger's comment"),
    ]


def test_every_top_level_definition_is_used():
    assert unused_definitions() == []


def test_no_module_is_only_a_second_name_for_another():
    assert pure_reexports() == []


def test_the_checks_see_a_dead_chain_and_a_reexport(tmp_path):
    package = tmp_path / "src" / "offloaddoctor"
    (package / "render").mkdir(parents=True)
    (package / "render" / "names.py").write_text(
        '"""A second name."""\n\nfrom offloaddoctor.text import safe\n\n__all__ = ["safe"]\n'
    )
    (package / "text.py").write_text(
        "def safe(s):\n    return s\n\n\ndef _helper(s):\n    return _helper(s[1:]) if s else s\n\n\n"
        "def unused(s):\n    return _helper(s)\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_text.py").write_text("from offloaddoctor.text import safe\n")
    assert unused_definitions(tmp_path) == ["offloaddoctor/text.py:5 _helper", "offloaddoctor/text.py:9 unused"]
    assert pure_reexports(package) == ["render/names.py"]
