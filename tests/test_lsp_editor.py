"""What an editor needs of `mimir lsp` beyond the checks: refreshes, dependents, hovers, links.

Driven over stdio with pytest-lsp, by a client that says it can refresh inlay hints:

- each finished check asks the client to request inlay hints again
  (`workspace/inlayHint/refresh`), so shapes appear as soon as the first check is done;
- closing an unsaved module re-checks the open modules that import it, from the file on
  disk again (their diagnostics no longer come from the discarded text);
- hover on an expression the checker refused shows the diagnostic and its operands'
  types; hover on a kernel's name shows its signature and what the check found;
- each diagnostic's code links to the codes page installed with Mimir, or to the
  `docsUrl` the client gives in `initializationOptions`.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from mimir.lsp.convert import CODES_PAGE

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "tests" / "projects" / "app"
DOCS = "https://docs.example.org/mimir/codes.html#{code}"

pytestmark = pytest.mark.asyncio(loop_scope="module")

_refreshes: list[float] = []


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[sys.executable, "-m", "mimir", "lsp"]),
)
async def client(lsp_client: LanguageClient):
    @lsp_client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def refresh(params: None) -> None:
        _refreshes.append(asyncio.get_running_loop().time())

    capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True)
        )
    )
    params = types.InitializeParams(
        capabilities=capabilities,
        root_uri=ROOT.as_uri(),
        initialization_options={"docsUrl": DOCS},
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


async def _settle(client: LanguageClient, uri: str, timeout: float = 60.0) -> list:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while uri not in client.diagnostics:
        if loop.time() > deadline:
            raise AssertionError(f"no diagnostics published for {uri}")
        await asyncio.sleep(0.01)
    return list(client.diagnostics[uri])


def _open(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.resolve().as_uri()
    client.diagnostics.pop(uri, None)
    text = path.read_text(encoding="utf-8") if text is None else text
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
    )
    return uri


def _close(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
    )


def _position(text: str, needle: str, offset: int = 0) -> types.Position:
    for number, line in enumerate(text.splitlines()):
        if needle in line:
            return types.Position(number, line.index(needle) + offset)
    raise AssertionError(needle)


async def _hover(client: LanguageClient, uri: str, at: types.Position) -> str:
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), at)
    )
    assert hover is not None
    assert isinstance(hover.contents, types.MarkupContent)
    return hover.contents.value


async def test_a_finished_check_asks_for_inlay_hints_again(client: LanguageClient):
    path = ROOT / "examples" / "linear_forward.py"
    before = len(_refreshes)
    uri = _open(client, path)
    # asked at once, before the check is done: answered once it is, with the shapes
    hints = await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            types.TextDocumentIdentifier(uri),
            types.Range(types.Position(0, 0), types.Position(40, 0)),
        )
    )
    assert [h.label for h in hints] == [" ▸ [32, 128]"]
    await _settle(client, uri)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while len(_refreshes) == before and loop.time() < deadline:
        await asyncio.sleep(0.01)
    assert len(_refreshes) > before
    _close(client, uri)


async def test_closing_an_unsaved_import_rechecks_its_importers(
    client: LanguageClient, tmp_path: Path
):
    shutil.copytree(PROJECT, tmp_path / "app")
    heads, dims = tmp_path / "app" / "heads.py", tmp_path / "app" / "dims.py"
    heads_uri = _open(client, heads)
    assert [d.code for d in await _settle(client, heads_uri)] == ["GPU018"]
    # an unsaved buffer that fixes heads.py's bound...
    dims_uri = _open(client, dims, dims.read_text().replace("min=2", "min=3"))
    await _settle(client, dims_uri)
    await asyncio.sleep(0.5)
    client.diagnostics.pop(heads_uri, None)
    dims_text = dims.read_text().replace("min=2", "min=3")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=2, uri=dims_uri),
            [types.TextDocumentContentChangeWholeDocument(dims_text + "\n")],
        )
    )
    assert await _settle(client, heads_uri) == []
    # ...closed without saving: heads.py is checked against dims.py on disk again
    client.diagnostics.pop(heads_uri, None)
    _close(client, dims_uri)
    assert [d.code for d in await _settle(client, heads_uri)] == ["GPU018"]
    _close(client, heads_uri)


async def test_hover_on_a_refused_expression_shows_its_operands(client: LanguageClient):
    path = ROOT / "examples" / "bad_matmul.py"
    text = path.read_text()
    uri = _open(client, path)
    await _settle(client, uri)
    shown = await _hover(client, uri, _position(text, "x @ w", offset=2))
    assert shown.startswith("**GPU011**: matmul shape mismatch: left has K=784, right has K=128")
    assert "- `x`: `Tensor[float32, 32, 784]`" in shown
    assert "- `w`: `Tensor[float32, 128, 10]`" in shown
    # on the kernel's name: its signature and the check's verdict
    shown = await _hover(client, uri, _position(text, "def bad_matmul", offset=5))
    assert "def bad_matmul(x: Tensor[float32, 32, 784], w: Tensor[float32, 128, 10])" in shown
    assert "1 error: GPU011 at line 10" in shown
    _close(client, uri)


async def test_hover_on_a_kernel_name_at_its_call(client: LanguageClient):
    path = ROOT / "examples" / "linear_forward.py"
    text = path.read_text()
    uri = _open(client, path)
    await _settle(client, uri)
    shown = await _hover(client, uri, _position(text, "linear_forward(x, w, b)", offset=3))
    assert "-> Tensor[float32, 32, 128]" in shown and "proven" in shown
    _close(client, uri)


async def test_codes_link_to_the_configured_documentation(client: LanguageClient):
    path = ROOT / "examples" / "bad_matmul.py"
    uri = _open(client, path)
    (d,) = await _settle(client, uri)
    assert d.code_description is not None
    assert d.code_description.href == "https://docs.example.org/mimir/codes.html#gpu011"
    _close(client, uri)


async def test_the_default_link_is_the_installed_codes_page() -> None:
    from mimir.diagnostics.diagnostic import Diagnostic, Span
    from mimir.lsp.convert import Lines, to_lsp

    d = Diagnostic("GPU011", "m", Span("f.py", 1, 1, 1, 2))
    lsp = to_lsp(d, "file:///f.py", Lines("x\n"), {})
    assert lsp.code_description is not None
    assert lsp.code_description.href == f"{CODES_PAGE.as_uri()}#gpu011"
    assert CODES_PAGE.is_file()
