"""`mimir lsp` driven as an editor drives it: over stdio, with pytest-lsp.

One server process serves the whole module. Every feature has a test here that
fails when it breaks: diagnostics equal to `mimir check --format json` on every
fixture and example, hover types, inlay shapes, quick fixes, definitions,
symbols, debounced and cancelled re-checks, and bad input answered, not fatal.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from mimir.check import check_source

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "tests" / "projects" / "app"
CHECKED = sorted(
    [
        *(ROOT / "tests" / "fixtures" / "check").glob("*.py"),
        *(ROOT / "examples").rglob("*.py"),
        *(ROOT / "tests" / "projects").rglob("*.py"),
    ]
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[sys.executable, "-m", "mimir", "lsp"]),
)
async def client(lsp_client: LanguageClient):
    params = types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=ROOT.as_uri())
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


_versions: dict[str, int] = {}


async def _settle(client: LanguageClient, uri: str, timeout: float = 60.0) -> list:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while uri not in client.diagnostics:
        if loop.time() > deadline:
            raise AssertionError(f"no diagnostics published for {uri}")
        await asyncio.sleep(0.01)
    return list(client.diagnostics[uri])


async def open_text(client: LanguageClient, path: Path, text: str | None = None) -> list:
    """Open (or reopen) a document and wait for its diagnostics."""
    uri = path.resolve().as_uri()
    text = path.read_text(encoding="utf-8") if text is None else text
    client.diagnostics.pop(uri, None)
    if uri in _versions:
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
        )
        await _settle(client, uri)
        client.diagnostics.pop(uri, None)
    _versions[uri] = 1
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
    )
    return await _settle(client, uri)


async def change(client: LanguageClient, path: Path, text: str, wait: bool = True) -> list:
    uri = path.resolve().as_uri()
    _versions[uri] += 1
    if wait:
        client.diagnostics.pop(uri, None)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=_versions[uri], uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text)],
        )
    )
    return await _settle(client, uri) if wait else []


def _cli_json(paths: list[Path]) -> dict[str, list[dict]]:
    run = subprocess.run(
        [sys.executable, "-m", "mimir", "check", "--format", "json", "--no-cache",
         *(str(p.relative_to(ROOT)) for p in paths)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode in (0, 1, 2), run.stderr
    by_file: dict[str, list[dict]] = {}
    for d in json.loads(run.stdout)["diagnostics"]:
        by_file.setdefault(str((ROOT / d["span"]["path"]).resolve()), []).append(d)
    return by_file


def _cli_as_lsp(d: dict) -> tuple:
    s = d["span"]
    message = f"{d['message']}\nwhy: {d['why']}\nfix: {d['fix']}"
    start, end = (s["line"] - 1, s["column"] - 1), (s["end_line"] - 1, s["end_column"] - 1)
    labels = tuple(
        ((lab["span"]["line"] - 1, lab["span"]["column"] - 1), lab["message"])
        for lab in d["labels"]
    )
    return d["code"], d["severity"], start, end, message, labels


def _lsp(d: types.Diagnostic) -> tuple:
    severity = "error" if d.severity == types.DiagnosticSeverity.Error else "warning"
    labels = tuple(
        ((r.location.range.start.line, r.location.range.start.character), r.message)
        for r in d.related_information or ()
    )
    rng = d.range
    return (
        d.code,
        severity,
        (rng.start.line, rng.start.character),
        (rng.end.line, rng.end.character),
        d.message,
        labels,
    )


async def test_diagnostics_equal_the_cli_on_every_fixture_and_example(client: LanguageClient):
    expected = _cli_json(CHECKED)
    assert sum(len(v) for v in expected.values()) > 50  # the comparison has teeth
    for path in CHECKED:
        got = await open_text(client, path)
        want = [_cli_as_lsp(d) for d in expected.get(str(path.resolve()), [])]
        assert [_lsp(d) for d in got] == want, path.name
        for d in got:
            assert d.source == "mimir"
            assert d.code_description is not None and d.code.lower() in d.code_description.href


FIXTURE = """from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N", min=2)
M = Dim("M")


@gpu
def linear(x: Tensor[float32, N, 784], w: Tensor[float32, 784, 128]) -> Tensor[float32, N, 128]:
    h = x @ w
    return h.relu()


@gpu
def wrong(x: Tensor[float32, N, 64], w: Tensor[float32, 32, 64]) -> Tensor[float32, N, 32]:
    return x @ w


@gpu
def center(x: Tensor[float32, N, M]) -> Tensor[float32, N, M]:
    return x - x.mean(axis=-1)


@gpu
def shifted(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x[1:] + x[:-1]
"""


def _line_of(text: str, needle: str) -> int:
    return next(k for k, line in enumerate(text.splitlines()) if needle in line + "\n")


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lsp") / "kernels.py"


async def test_related_information_and_counterexample(client: LanguageClient, doc: Path):
    found = await open_text(client, doc, FIXTURE)
    by_code = {d.code: d for d in found}
    assert set(by_code) == {"GPU010", "GPU011", "GPU015"}
    matmul = by_code["GPU011"]
    assert matmul.range.start.line == _line_of(FIXTURE, "return x @ w\n")
    related = matmul.related_information
    assert related and all(r.location.uri == doc.resolve().as_uri() for r in related)
    assert {r.location.range.start.line for r in related} == {_line_of(FIXTURE, "def wrong")}
    broadcast = by_code["GPU010"]
    assert "counterexample: " in broadcast.message


async def test_hover_shows_the_proven_type_and_dims(client: LanguageClient, doc: Path):
    await open_text(client, doc, FIXTURE)
    line = _line_of(FIXTURE, "h = x @ w")
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(doc.resolve().as_uri()),
                          types.Position(line, 4))
    )  # fmt: skip
    assert hover is not None
    assert "Tensor[float32, N, 128]" in hover.contents.value
    assert "on `gpu`" in hover.contents.value and "`N`: min=2" in hover.contents.value
    # the `x` inside `x @ w`: the parameter's annotated type
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(doc.resolve().as_uri()),
                          types.Position(line, 8))
    )  # fmt: skip
    assert "Tensor[float32, N, 784]" in hover.contents.value


async def test_hover_on_a_dim_and_on_a_code(client: LanguageClient, doc: Path):
    text = FIXTURE.replace("return x @ w\n", "return x @ w  # mimir: ignore[GPU011]\n")
    await open_text(client, doc, text)
    uri = doc.resolve().as_uri()
    line = _line_of(text, "def linear")
    col = text.splitlines()[line].index(", N,") + 2
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, col))
    )
    assert hover is not None
    assert 'N = Dim("N", min=2)' in hover.contents.value and "min=2" in hover.contents.value
    line = _line_of(text, "ignore[GPU011]")
    col = text.splitlines()[line].index("GPU011") + 2
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, col))
    )
    assert hover is not None and "GPU011" in hover.contents.value
    assert "matmul" in hover.contents.value and "fix:" in hover.contents.value


async def test_inlay_hints_show_the_shape_of_each_assignment(client: LanguageClient, doc: Path):
    await open_text(client, doc, FIXTURE)
    hints = await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            types.TextDocumentIdentifier(doc.resolve().as_uri()),
            types.Range(types.Position(0, 0), types.Position(100, 0)),
        )
    )
    line = _line_of(FIXTURE, "h = x @ w")
    assert [(h.position.line, h.position.character, h.label) for h in hints] == [
        (line, len("    h = x @ w"), " ▸ [N, 128]")
    ]


async def _actions(client: LanguageClient, doc: Path, line: int) -> list[types.CodeAction]:
    found = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(doc.resolve().as_uri()),
            types.Range(types.Position(line, 0), types.Position(line, 200)),
            types.CodeActionContext(diagnostics=[]),
        )
    )
    return list(found or [])


def _apply(text: str, action: types.CodeAction, uri: str) -> str:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    edits = sorted(
        action.edit.changes[uri], key=lambda e: (e.range.start.line, e.range.start.character)
    )
    for e in reversed(edits):
        a = offsets[e.range.start.line] + e.range.start.character
        b = offsets[e.range.end.line] + e.range.end.character
        text = text[:a] + e.new_text + text[b:]
    return text


async def test_code_actions_fix_what_they_offer_to_fix(client: LanguageClient, doc: Path):
    uri = doc.resolve().as_uri()
    await open_text(client, doc, FIXTURE)
    transpose = [
        a for a in await _actions(client, doc, _line_of(FIXTURE, "return x @ w\n"))
        if ".T" in a.title
    ]  # fmt: skip
    assert len(transpose) == 1
    fixed = _apply(FIXTURE, transpose[0], uri)
    assert "return x @ w.T\n" in fixed
    keep = [
        a for a in await _actions(client, doc, _line_of(FIXTURE, "x.mean(axis=-1)"))
        if "keepdims" in a.title
    ]  # fmt: skip
    assert len(keep) == 1
    fixed = _apply(fixed, keep[0], uri)
    assert "x.mean(axis=-1, keepdims=True)" in fixed
    ignore = [
        a for a in await _actions(client, doc, _line_of(FIXTURE, "x[1:] + x[:-1]"))
        if "ignore" in a.title
    ]  # fmt: skip
    assert len(ignore) == 1
    fixed = _apply(fixed, ignore[0], uri)
    assert "x[1:] + x[:-1]  # mimir: ignore[GPU015]" in fixed
    # every fix applied: the file checks clean
    assert await change(client, doc, fixed) == []


async def test_to_gpu_action_at_a_kernel_call(client: LanguageClient, tmp_path: Path):
    text = (
        "from mimir.array import Tensor, float32, gpu, zeros\n\n\n"
        "@gpu\ndef double(x: Tensor[float32, 4]) -> Tensor[float32, 4]:\n    return x * 2\n\n\n"
        "def main():\n    a = zeros((4,))\n    return double(a)\n"
    )
    path = tmp_path / "host.py"
    found = await open_text(client, path, text)
    assert [d.code for d in found] == ["GPU060"]
    actions = [
        a for a in await _actions(client, path, _line_of(text, "double(a)")) if "gpu" in a.title
    ]
    assert len(actions) == 1
    fixed = _apply(text, actions[0], path.resolve().as_uri())
    assert 'return double(a.to("gpu"))' in fixed
    call = _line_of(text, "double(a)")
    found = await client.text_document_definition_async(
        types.DefinitionParams(
            types.TextDocumentIdentifier(path.resolve().as_uri()), types.Position(call, 12)
        )
    )
    assert found.range.start == types.Position(_line_of(text, "def double"), 4)
    assert await change(client, path, fixed) == []


async def test_definition_and_document_symbols(client: LanguageClient, doc: Path):
    uri = doc.resolve().as_uri()
    await open_text(client, doc, FIXTURE)
    line = _line_of(FIXTURE, "def center")
    col = FIXTURE.splitlines()[line].index(" M]") + 1
    found = await client.text_document_definition_async(
        types.DefinitionParams(types.TextDocumentIdentifier(uri), types.Position(line, col))
    )
    assert found.uri == uri and found.range.start.line == _line_of(FIXTURE, 'M = Dim("M")')
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(types.TextDocumentIdentifier(uri))
    )
    assert [(s.name, s.kind) for s in symbols] == [
        ("N", types.SymbolKind.TypeParameter),
        ("M", types.SymbolKind.TypeParameter),
        ("linear", types.SymbolKind.Function),
        ("wrong", types.SymbolKind.Function),
        ("center", types.SymbolKind.Function),
        ("shifted", types.SymbolKind.Function),
    ]


async def test_newer_edits_win_and_unchanged_kernels_are_not_reproven(
    client: LanguageClient, doc: Path
):
    uri = doc.resolve().as_uri()
    await open_text(client, doc, FIXTURE)
    before = await client.workspace_execute_command_async(types.ExecuteCommandParams("mimir.stats"))
    # A burst of edits inside one kernel: only the last text's diagnostics are published.
    texts = [FIXTURE.replace("784, 128]", f"784, {n}]") for n in (129, 130, 131, 132)]
    texts.append(FIXTURE.replace("w: Tensor[float32, 32, 64]", "w: Tensor[float32, 64, 32]"))
    for text in texts[:-1]:
        await change(client, doc, text, wait=False)
    final = await change(client, doc, texts[-1])
    assert sorted(d.code for d in final) == ["GPU010", "GPU015"]
    await asyncio.sleep(0.3)  # nothing stale arrives after the newest result
    assert list(client.diagnostics[uri]) == final
    after = await client.workspace_execute_command_async(types.ExecuteCommandParams("mimir.stats"))
    checks = after["checks"] - before["checks"]
    proven = after["kernels_proven"] - before["kernels_proven"]
    # Edits sent faster than the debounce are never checked on their own.
    assert 1 <= checks < len(texts)
    # Each check re-proved only the one kernel its edit touched; the other three (of four)
    # came from the per-kernel cache.
    assert 1 <= proven <= checks


async def test_form_feeds_and_line_separators_do_not_move_diagnostics(
    client: LanguageClient, tmp_path: Path
):
    # A form feed and a U+2028 inside a comment are no line ends to Python (or to the
    # LSP client). Columns go out in UTF-16 units, counted over the diagnostic's own line:
    # split at those characters too, the server would count them over the line two above
    # (`@gpu  # 𝑤𝑟𝑜𝑛𝑔`, whose letters take two units each) and move the column right.
    text = FIXTURE.replace("M = Dim(", "# sections\x0cand\u2028more\nM = Dim(", 1)
    text = text.replace("@gpu\ndef wrong", "@gpu  # 𝑤𝑟𝑜𝑛𝑔\ndef wrong", 1)
    path = tmp_path / "separators.py"
    found = await open_text(client, path, text)
    cli = check_source(str(path), text).diagnostics
    assert sorted((d.range.start.line + 1, d.range.start.character + 1) for d in found) == sorted(
        (d.span.line, d.span.column) for d in cli
    )
    assert any(d.code == "GPU011" for d in found)


async def test_bad_input_is_answered_not_fatal(client: LanguageClient, tmp_path: Path):
    path = tmp_path / "broken.py"
    found = await open_text(client, path, "def f(:\n")
    assert [d.code for d in found] == ["GPU001"]
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(path.resolve().as_uri()),
                          types.Position(500, 500))
    )  # fmt: skip
    assert hover is None
    # a document the server never saw
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier("file:///nowhere.py"), types.Position(0, 0))
    )
    assert hover is None
    # still serving
    assert await open_text(client, path, "x = 1\n") == []


async def test_workspace_configuration_is_honoured_and_rereads(
    client: LanguageClient, tmp_path: Path
):
    project = tmp_path / "proj"
    project.mkdir()
    config = project / "pyproject.toml"
    config.write_text('[tool.mimir]\nignore = ["GPU015"]\n')
    path = project / "k.py"
    found = await open_text(client, path, FIXTURE)
    assert sorted(d.code for d in found) == ["GPU010", "GPU011"]
    config.write_text("[tool.mimir]\n")
    uri = path.resolve().as_uri()
    client.diagnostics.pop(uri, None)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(config.resolve().as_uri(), types.FileChangeType.Changed)]
        )
    )
    found = await _settle(client, uri)
    assert sorted(d.code for d in found) == ["GPU010", "GPU011", "GPU015"]


async def test_definition_and_hover_across_modules(client: LanguageClient):
    heads = PROJECT / "heads.py"
    text = heads.read_text(encoding="utf-8")
    await open_text(client, heads)
    uri = heads.resolve().as_uri()
    line = _line_of(text, "def first_rows")
    col = text.splitlines()[line].index("Rows") + 1
    found = await client.text_document_definition_async(
        types.DefinitionParams(types.TextDocumentIdentifier(uri), types.Position(line, col))
    )
    dims = PROJECT / "dims.py"
    assert found.uri == dims.resolve().as_uri()
    assert found.range.start.line == _line_of(dims.read_text(), 'N = Dim("N"')
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, col))
    )
    assert 'N = Dim("N", min=2, max=4096)' in hover.contents.value
    # a kernel imported through the package's re-export
    model = PROJECT / "model.py"
    mtext = model.read_text(encoding="utf-8")
    await open_text(client, model)
    line = _line_of(mtext, "return linear(x, w)  #")
    found = await client.text_document_definition_async(
        types.DefinitionParams(
            types.TextDocumentIdentifier(model.resolve().as_uri()), types.Position(line, 12)
        )
    )
    layers = PROJECT / "layers.py"
    assert found.uri == layers.resolve().as_uri()
    assert found.range.start.line == _line_of(layers.read_text(), "def linear")


async def test_an_edit_to_an_imported_module_rechecks_its_open_dependents(
    client: LanguageClient, tmp_path: Path
):
    import shutil

    shutil.copytree(PROJECT, tmp_path / "app")
    heads, dims = tmp_path / "app" / "heads.py", tmp_path / "app" / "dims.py"
    assert [d.code for d in await open_text(client, heads)] == ["GPU018"]
    await open_text(client, dims)
    heads_uri = heads.resolve().as_uri()
    await asyncio.sleep(0.5)  # opening dims.py re-checked heads.py once more
    client.diagnostics.pop(heads_uri, None)
    # unsaved: only the editor's buffer says min=3
    await change(client, dims, dims.read_text().replace("min=2", "min=3"))
    assert await _settle(client, heads_uri) == []


async def test_save_rechecks_with_the_saved_text(client: LanguageClient, tmp_path: Path):
    path = tmp_path / "saved.py"
    path.write_text(FIXTURE)
    assert len(await open_text(client, path)) == 3
    clean = FIXTURE.split("\n\n@gpu\ndef wrong")[0] + "\n"
    uri = path.resolve().as_uri()
    client.diagnostics.pop(uri, None)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri), text=clean)
    )
    assert await _settle(client, uri) == []


async def test_hover_in_a_helper_shows_its_type_at_each_call(client: LanguageClient):
    calls = ROOT / "tests" / "fixtures" / "check" / "calls.py"
    text = calls.read_text(encoding="utf-8")
    await open_text(client, calls)
    line = _line_of(text, "return t - t.mean(axis=-1, keepdims=True)")
    hover = await client.text_document_hover_async(
        types.HoverParams(
            types.TextDocumentIdentifier(calls.resolve().as_uri()), types.Position(line, 11)
        )
    )
    assert hover is not None
    assert "`Tensor[float32, N, 64]` in the call from `center_rows`" in hover.contents.value
    assert "`Tensor[float32, M, 32]` in the call from `center_cols`" in hover.contents.value


HARD = """from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N", min=2)


@gpu
def hard(n: Tensor[float32, N], x: Tensor[float32, N * N * N - N]) -> Tensor[float32, N]:
    y = x.reshape(-1, 6)
    return n
"""


async def test_a_long_proof_never_blocks_requests(client: LanguageClient, doc: Path, tmp_path):
    await open_text(client, doc, FIXTURE)
    hard = tmp_path / "hard.py"
    uri = hard.resolve().as_uri()
    client.diagnostics.pop(uri, None)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, HARD))
    )
    await asyncio.sleep(0.3)  # the proof (Z3 gives up after the 5 s timeout) is under way
    hover = await client.text_document_hover_async(
        types.HoverParams(
            types.TextDocumentIdentifier(doc.resolve().as_uri()),
            types.Position(_line_of(FIXTURE, "h = x @ w"), 4),
        )
    )
    # answered while the other document's proof still runs
    assert hover is not None and uri not in client.diagnostics
    (found,) = await _settle(client, uri)
    assert found.code == "GPU050"


async def test_definition_of_a_helper_a_kernel_calls(client: LanguageClient):
    calls = ROOT / "tests" / "fixtures" / "check" / "calls.py"
    text = calls.read_text(encoding="utf-8")
    await open_text(client, calls)
    line = _line_of(text, "    return center(x)\n")
    found = await client.text_document_definition_async(
        types.DefinitionParams(
            types.TextDocumentIdentifier(calls.resolve().as_uri()), types.Position(line, 12)
        )
    )
    assert found.range.start == types.Position(_line_of(text, "def center(t):"), 4)


async def test_a_failure_inside_an_imported_helper_shows_at_the_call(
    client: LanguageClient, tmp_path: Path
):
    (tmp_path / "helpers.py").write_text("def project(a, b):\n    return a @ b\n")
    main = tmp_path / "main.py"
    text = (
        "from helpers import project\n\nfrom mimir.array import Tensor, float32, gpu\n\n\n"
        "@gpu\ndef k(x: Tensor[float32, 8, 4], w: Tensor[float32, 3, 2]) -> "
        "Tensor[float32, 8, 2]:\n    return project(x, w)\n"
    )
    (found,) = await open_text(client, main, text)
    assert found.code == "GPU011"
    assert found.range.start == types.Position(_line_of(text, "return project"), 11)
    inside = found.related_information[0]
    assert inside.location.uri == (tmp_path / "helpers.py").resolve().as_uri()
    assert inside.location.range.start.line == 1


async def test_definition_through_a_module_alias(client: LanguageClient):
    aliases = PROJECT / "aliases.py"
    text = aliases.read_text(encoding="utf-8")
    await open_text(client, aliases)
    line = _line_of(text, "def first_half")
    col = text.splitlines()[line].index("d.N") + 2
    found = await client.text_document_definition_async(
        types.DefinitionParams(
            types.TextDocumentIdentifier(aliases.resolve().as_uri()), types.Position(line, col)
        )
    )
    dims = PROJECT / "dims.py"
    assert found.uri == dims.resolve().as_uri()
    assert found.range.start.line == _line_of(dims.read_text(), 'N = Dim("N"')
    hover = await client.text_document_hover_async(
        types.HoverParams(
            types.TextDocumentIdentifier(aliases.resolve().as_uri()), types.Position(line, col)
        )
    )
    assert 'N = Dim("N", min=2, max=4096)' in hover.contents.value
