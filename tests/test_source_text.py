"""Source text as Python reads it: encodings (PEP 263, byte-order mark), line ends, columns.

A file's bytes decode the way `tokenize.open` decodes them; lines end at `\\n`, `\\r\\n` and
`\\r` only (a form feed or U+2028 is not a line end for Python); columns count characters,
not UTF-8 bytes. Each is checked in the text, JSON and SARIF output of `mimir check`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mimir.check import check_file
from mimir.cli import app
from mimir.parse.spans import SourceFile, read_source

MISMATCH = (
    "@gpu\n"
    "def f(a: Tensor[float32, 4, 3], b: Tensor[float32, 5, 2]) -> Tensor[float32, 4, 2]:\n"
    "    return a @ b\n"
)
HEADER = "from mimir.array import Tensor, float32, gpu\n"


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------- encodings (item 10)


@pytest.mark.parametrize(
    ("encoding", "comment"),
    [("latin-1", "# café, naïve\n"), ("koi8-r", "# привет, мир\n"), ("cp1252", "# “quoted”\n")],
)
def test_a_coding_declaration_is_honoured(tmp_path: Path, encoding: str, comment: str) -> None:
    text = f"# -*- coding: {encoding} -*-\n{comment}{HEADER}\n\n{MISMATCH}"
    path = _write(tmp_path, "k.py", text.encode(encoding))
    decoded, problem = read_source(path)
    assert problem is None
    assert decoded == text
    result = check_file(path)
    assert not result.unreadable
    assert [(d.code, d.span.line) for d in result.diagnostics] == [("GPU011", 8)]


def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    text = f"{HEADER}\n\n{MISMATCH}"
    path = _write(tmp_path, "k.py", b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert read_source(path) == (text, None)
    assert [d.code for d in check_file(path).diagnostics] == ["GPU011"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", "encoding problem"),
        (b"# coding: no-such-codec\nx = 1\n", "unknown encoding: no-such-codec"),
        (b"x = '\xe9'\n", "invalid or missing encoding declaration"),
        (b"x = 1\ny = 2\nz = '\xe9'\n", "invalid continuation byte"),
    ],
)
def test_undecodable_source_is_gpu002(tmp_path: Path, data: bytes, reason: str) -> None:
    # Each of these is a SyntaxError for `python k.py` too.
    text, problem = read_source(_write(tmp_path, "k.py", data))
    assert text is None and problem is not None
    assert problem.code == "GPU002" and reason in problem.message


def test_only_the_first_two_lines_may_declare_a_coding(tmp_path: Path) -> None:
    data = b"x = 1\ny = 2\n# coding: latin-1\nz = '\xe9'\n"
    _, problem = read_source(_write(tmp_path, "k.py", data))
    assert problem is not None and problem.code == "GPU002"


# ---------------------------------------------------------------- lines and columns (item 11)


def test_lines_split_as_the_tokenizer_splits_them() -> None:
    from mimir.parse.spans import split_lines

    text = "a\x0cb\u2028c\x1cd\x85e\r\nf\rg\nh\n"
    assert split_lines(text) == ["a\x0cb\u2028c\x1cd\x85e", "f", "g", "h"]
    assert split_lines("a\n\n") == ["a", ""]
    assert split_lines("") == []


def test_node_text_is_the_source_segment() -> None:
    import ast

    text = "ŷ = (1 +  # \u2028\n  2) + zz\nw = ŷ[  0 ]\r\nq = 'é\u2029' + \x0c'ü'\n"
    source = SourceFile("k.py", text)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.expr):
            expected = ast.get_source_segment(text, node)
            assert source.text(node) == expected.replace("\r\n", "\n")


# Each prefix puts something before the fault's line that `str.splitlines` counts as a line
# end or that takes several UTF-8 bytes; the fault must stay at line 7, columns 12 to 17.
PREFIXES = {
    "form_feed": "x = 1  # a\x0cb\n",
    "line_separator": "x = 1  # a\u2028b\n",
    "paragraph_separator": "s = 'a\u2029b'\n",
    "file_separator": "x = 1  # a\x1cb\n",
    "next_line": "x = 1  # a\x85b\n",
}


def _fault_file(tmp_path: Path, prefix: str, body: str = "    return a @ b\n") -> Path:
    text = (
        f"{HEADER}{prefix}\n\n@gpu\n"
        "def f(a: Tensor[float32, 4, 3], b: Tensor[float32, 5, 2]) -> Tensor[float32, 4, 2]:\n"
        f"{body}"
    )
    return _write(tmp_path, "k.py", text.encode("utf-8"))


def _outputs(path: Path) -> tuple[str, dict, dict]:
    runner = CliRunner()
    args = ["check", "--no-cache", str(path)]
    text = runner.invoke(app, args).output
    as_json = json.loads(runner.invoke(app, [*args, "--format", "json"]).output)
    sarif = json.loads(runner.invoke(app, [*args, "--format", "sarif"]).output)
    return text, as_json, sarif


def _json_span(doc: dict) -> tuple[int, int, int, int]:
    (d,) = doc["diagnostics"]
    s = d["span"]
    return s["line"], s["column"], s["end_line"], s["end_column"]


def _sarif_span(doc: dict) -> tuple[tuple[int, int, int, int], str]:
    (r,) = doc["runs"][0]["results"]
    reg = r["locations"][0]["physicalLocation"]["region"]
    span = (reg["startLine"], reg["startColumn"], reg["endLine"], reg["endColumn"])
    return span, r["partialFingerprints"]["mimir/v1"]


@pytest.mark.parametrize("name", sorted(PREFIXES))
def test_odd_line_breaks_keep_lines_columns_and_fingerprints(tmp_path: Path, name: str) -> None:
    plain = tmp_path / "plain"
    odd = tmp_path / "odd"
    plain.mkdir()
    odd.mkdir()
    text_a, json_a, sarif_a = _outputs(_fault_file(plain, "x = 1  # ab\n"))
    text_b, json_b, sarif_b = _outputs(_fault_file(odd, PREFIXES[name]))
    assert ":7:12: error[GPU011]" in text_a
    assert ":7:12: error[GPU011]" in text_b
    assert _json_span(json_a) == _json_span(json_b) == (7, 12, 7, 17)
    assert _sarif_span(sarif_a) == _sarif_span(sarif_b)


def test_columns_count_characters_not_bytes(tmp_path: Path) -> None:
    body = "    ŷ = a\n    return ŷ @ b\n"
    text, as_json, sarif = _outputs(_fault_file(tmp_path, "x = 1  # ab\n", body))
    # `ŷ` is one character and two UTF-8 bytes: `ast` ends the span at byte 17, not 16.
    assert ":8:12: error[GPU011]" in text
    assert _json_span(as_json) == (8, 12, 8, 17)
    assert _sarif_span(sarif)[0] == (8, 12, 8, 17)
    assert sarif["runs"][0]["columnKind"] == "unicodeCodePoints"
