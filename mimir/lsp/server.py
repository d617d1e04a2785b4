"""`mimir lsp`: the language server, nothing but protocol over `mimir.check`.

Each open document is checked by `check_source`, the function behind `mimir
check`, with the configuration found above the file (`mimir.toml` or
`[tool.mimir]`) and its `select`/`ignore`/per-file ignores applied, so the
editor shows exactly what the command line prints.

Scheduling: an edit that follows the previous one within `debounce` seconds (a
burst of typing) waits `debounce` seconds; an edit on its own (a paste, a quick
fix, the first key after a pause) is checked at once. The check runs on one worker
thread (Z3 never runs on the event loop, so requests keep being answered). A
newer edit of the same document cancels the older check: its pending wait is
cancelled, and a check already running stops at the next kernel and its result
is dropped. A per-kernel cache keyed by the kernel's text, position and the
module-level facts it reads means an edit re-proves only the kernels it touched.

A request about a document (hover, inlay hints, fixes, definitions, symbols)
is answered from its newest text: when a check of that text is pending, the
request ends its debounce wait and is answered when the check is done, so a
hover after a burst of edits equals a hover after opening the final text. A
document larger than `max-file-size` (the configuration's, as `mimir check`
reads it) is not checked: it gets one GPU003 diagnostic, as on the command line.

Every handler logs and answers on bad input; the server never dies of a
request. The wire is `mimir.lsp.session` (framing faults, malformed JSON-RPC,
`shutdown` and `exit` as the specification says); over TCP each connection is
a session of its own, with its own documents, sharing one checker thread.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import logging
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer

import mimir
from mimir.check import CheckCancelledError, FileResult, check_source
from mimir.diagnostics.diagnostic import Diagnostic, Label, Span
from mimir.gate.config import Config, ConfigError, load_config
from mimir.lsp import actions, query
from mimir.lsp.convert import Lines, path_of, to_lsp, uri_of
from mimir.lsp.session import Session
from mimir.project import Project
from mimir.safeio import too_large

log = logging.getLogger("mimir.lsp")

DEFAULT_DEBOUNCE_S = 0.02
_KERNEL_CACHE_SIZE = 4096
_T = TypeVar("_T")


class _SettledHeap:
    """Keeps Python's cyclic collector off what the server holds for long.

    A full collection walks every live object of the oldest generation, and a server
    holds many (its imported modules, Z3, every open document's tree and values): an edit
    whose check happened to start one took about 100 ms more on a file of 40 kernels. So
    once a check is published, what survived it is collected and frozen (`gc.freeze`),
    out of every later walk; each `thaw_every`-th time the frozen objects are thawed and
    collected in full first, so cyclic garbage among them is still reclaimed.
    """

    def __init__(self, thaw_every: int = 64) -> None:
        self.thaw_every = thaw_every
        self.settled = 0

    def settle(self) -> None:
        self.settled += 1
        if self.settled % self.thaw_every == 0:
            gc.unfreeze()
        gc.collect()
        gc.freeze()


@dataclass
class _Document:
    uri: str
    path: str
    text: str = ""
    version: int | None = None
    generation: int = 0
    checked: int = -1  # the generation whose text `result` and `diagnostics` are of
    last_edit: float = float("-inf")  # loop time of the latest edit, for the debounce
    task: asyncio.Task | None = None
    hurry: asyncio.Event | None = None  # set to end the pending check's debounce wait
    result: FileResult | None = None  # the last completed check, for queries
    lines: Lines = field(default_factory=lambda: Lines(""))  # of the text `result` checked
    diagnostics: list[Diagnostic] = field(default_factory=list)
    depends_on: set[str] = field(default_factory=set)  # project modules it imports
    others: dict[str, Lines] = field(default_factory=dict)  # lines of files labels point into


class _LRU(OrderedDict):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.stores = 0  # cache misses: kernels proven

    def __getitem__(self, key: Any) -> Any:
        value = super().__getitem__(key)
        self.move_to_end(key)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.stores += 1
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


class MimirServer(LanguageServer):
    def __init__(
        self,
        z3_timeout: int | None = None,
        debounce: float = DEFAULT_DEBOUNCE_S,
        checker: ThreadPoolExecutor | None = None,
        kernel_cache: _LRU | None = None,
        docs_url: str | None = None,
    ):
        super().__init__("mimir", mimir.__version__)
        self.z3_timeout = z3_timeout
        self.debounce = debounce
        # the template of each code's link (`convert.docs_link`); None: the installed page
        self.docs_url = docs_url
        self.documents: dict[str, _Document] = {}
        self.root: Path | None = None
        self._configs: dict[Path, Config] = {}
        # One thread: Z3's global context is not shared between threads (sessions over TCP
        # share it, and the kernel cache, which only that thread touches).
        self._checker = checker or ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="mimir-check"
        )
        self._kernel_cache: _LRU = (
            _LRU(_KERNEL_CACHE_SIZE) if kernel_cache is None else kernel_cache
        )
        self.checks_run = 0
        self._heap = _SettledHeap()

    def report_server_error(self, error: Exception, source: Any) -> None:
        log.error("internal error: %s", error)

    # -- configuration

    def config_for(self, path: str) -> Config:
        start = Path(path).parent
        if start not in self._configs:
            try:
                config = load_config(start=start)
            except ConfigError as err:
                self.window_log_message(
                    types.LogMessageParams(types.MessageType.Error, f"mimir: {err}")
                )
                config = Config(root=self.root or start)
            if self.z3_timeout is not None:
                config = config.override(z3_timeout=self.z3_timeout)
            self._configs[start] = config
        return self._configs[start]

    def forget_configs(self) -> None:
        self._configs.clear()

    # -- checking

    def schedule(
        self, uri: str, text: str, version: int | None, delay: float | None = None
    ) -> None:
        doc = self.documents.get(uri)
        if doc is None:
            doc = self.documents[uri] = _Document(uri, path_of(uri))
        doc.text, doc.version = text, version
        doc.generation += 1
        if doc.task is not None and not doc.task.done():
            doc.task.cancel()
        limit = self.config_for(doc.path).max_file_size
        size = len(text) if len(text) * 4 <= limit else len(text.encode("utf-8", "surrogatepass"))
        if size > limit:  # as `mimir check` does: one diagnostic, and no check
            span = Span(doc.path, 1, 1, 1, 1)
            doc.result, doc.lines, doc.others = None, Lines(""), {}
            doc.diagnostics = [Diagnostic("GPU003", too_large(size, limit), span)]
            doc.checked, doc.task = doc.generation, None
            self.publish(doc, version)
            return
        now = asyncio.get_running_loop().time()
        if delay is None:  # debounce only a burst: an edit on its own is checked at once
            delay = self.debounce if now - doc.last_edit < self.debounce else 0.0
        doc.last_edit = now
        wait = delay
        doc.hurry = asyncio.Event()
        doc.task = asyncio.get_running_loop().create_task(
            self._check(doc, doc.generation, wait, doc.hurry)
        )
        # Open documents that import this one see its unsaved text: check them again too.
        for other in self.documents.values():
            if other is not doc and doc.path in other.depends_on:
                other.generation += 1
                if other.task is not None and not other.task.done():
                    other.task.cancel()
                other.hurry = asyncio.Event()
                other.task = asyncio.get_running_loop().create_task(
                    self._check(other, other.generation, wait, other.hurry)
                )

    async def _check(
        self, doc: _Document, generation: int, delay: float, hurry: asyncio.Event
    ) -> None:
        if delay > 0:
            try:  # the debounce; a request about the document ends it
                await asyncio.wait_for(hurry.wait(), delay)
            except TimeoutError:
                pass
        config = self.config_for(doc.path)
        text, version = doc.text, doc.version
        overlay = {d.path: d.text for d in self.documents.values()}
        # Requests about the document wait for this check (`checked`), so the last result is
        # no longer read: dropping it now keeps one syntax tree of a big document in memory
        # at a time, not two.
        doc.result, doc.lines = None, Lines("")

        def stale() -> bool:
            return doc.generation != generation

        loop = asyncio.get_running_loop()
        try:
            result, depends_on, others = await loop.run_in_executor(
                self._checker, self._run_check, doc.path, text, config, overlay, stale
            )
        except CheckCancelledError:
            return
        except Exception as err:  # a checker bug must not take the server down
            log.exception("checking %s failed", doc.path)
            self.window_log_message(
                types.LogMessageParams(
                    types.MessageType.Error, f"mimir: checking {doc.path} failed: {err}"
                )
            )
            return
        if stale():
            return
        doc.result, doc.lines = result, Lines(text)
        doc.checked = generation
        doc.diagnostics = result.diagnostics
        doc.depends_on, doc.others = depends_on, others
        self.publish(doc, version)
        self.refresh_inlay_hints()
        self._heap.settle()  # after the publish: not part of the edit's latency

    def refresh_inlay_hints(self) -> None:
        """Ask the client to request inlay hints again (`workspace/inlayHint/refresh`), when it
        says it can: a check finished, so shapes may have appeared or changed."""
        caps = self.client_capabilities.workspace if self.client_capabilities else None
        hints = caps.inlay_hint if caps else None
        if hints is None or not hints.refresh_support:
            return
        try:
            self.workspace_inlay_hint_refresh(None)
        except Exception as err:  # noqa: BLE001 - a client gone mid-call; never fatal
            log.warning("inlay hint refresh failed: %s", err)

    def recheck_dependents(self, path: str) -> None:
        """Open documents that import `path` are checked again (it changed, or closed and its
        text on disk is what they see now)."""
        for other in list(self.documents.values()):
            if path in other.depends_on:
                self.schedule(other.uri, other.text, other.version, delay=0)

    def _run_check(
        self,
        path: str,
        text: str,
        config: Config,
        overlay: dict[str, str],
        stale: Callable[[], bool],
    ) -> tuple[FileResult, set[str], dict[str, Lines]]:
        self.checks_run += 1
        project = Project(config.import_roots(), overlay=overlay)
        result = check_source(
            path,
            text,
            config.z3_timeout,
            kernel_cache=self._kernel_cache,
            cancelled=stale,
            project=project,
        )
        rel = config.relative(path)
        result.diagnostics = [
            _in_this_file(d, path) for d in result.diagnostics if config.reports(d.code, rel)
        ]
        if result.info is not None:
            project.known_imports(Path(path), result.info.tree)
        depends_on = {str(p) for p in project.reachable(Path(path))}
        others = {}
        for d in result.diagnostics:
            for label in d.labels:
                if label.span.path != path and label.span.path not in others:
                    others[label.span.path] = Lines(project.text(Path(label.span.path)) or "")
        return result, depends_on, others

    def publish(self, doc: _Document, version: int | None) -> None:
        lines = doc.lines
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=doc.uri,
                version=version,
                diagnostics=[
                    to_lsp(d, doc.uri, lines, doc.others, self.docs_url) for d in doc.diagnostics
                ],
            )
        )

    def recheck_all(self) -> None:
        for doc in self.documents.values():
            self.schedule(doc.uri, doc.text, doc.version, delay=0)

    # -- queries over the last result

    async def checked(self, uri: str) -> tuple[_Document, FileResult] | None:
        """The document and the result of checking its newest text, once that check is done.

        A pending check is hurried past its debounce and waited for; one that a newer edit
        cancels is followed by the newer one. A check that failed leaves the last result."""
        doc = self.documents.get(uri)
        while doc is not None and doc.checked != doc.generation:
            task = doc.task
            if task is None:
                break
            if doc.hurry is not None:
                doc.hurry.set()
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise  # this request itself was cancelled
            if task is doc.task and doc.checked != doc.generation:
                break  # the check of the newest text ended without a result
            doc = self.documents.get(uri)
        if doc is None or doc.result is None:
            return None
        return doc, doc.result

    def close(self) -> None:
        """End this session: its pending checks are dropped (the checker thread may be shared)."""
        for doc in self.documents.values():
            doc.generation += 1
            if doc.task is not None:
                doc.task.cancel()


def _safe(default: Any) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
    """Log any exception of a handler and answer `default`: bad input never kills the server."""

    def wrap(fn: Callable[..., _T]) -> Callable[..., _T]:
        def failed(ls: MimirServer, err: Exception) -> Any:
            log.exception("%s failed", fn.__name__)
            ls.window_log_message(
                types.LogMessageParams(
                    types.MessageType.Error, f"mimir: {fn.__name__} failed: {err}"
                )
            )
            return default

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def handle(ls: MimirServer, params: Any) -> Any:
                try:
                    return await fn(ls, params)
                except Exception as err:
                    return failed(ls, err)

            return handle  # type: ignore[return-value]

        @functools.wraps(fn)
        def handler(ls: MimirServer, params: Any) -> Any:
            try:
                return fn(ls, params)
            except Exception as err:
                return failed(ls, err)

        return handler

    return wrap


def _range(lines: Lines, span: Span) -> types.Range:
    return lines.range(span)


def build_server(
    z3_timeout: int | None = None,
    debounce: float = DEFAULT_DEBOUNCE_S,
    checker: ThreadPoolExecutor | None = None,
    kernel_cache: _LRU | None = None,
    docs_url: str | None = None,
) -> MimirServer:
    server = MimirServer(
        z3_timeout=z3_timeout,
        debounce=debounce,
        checker=checker,
        kernel_cache=kernel_cache,
        docs_url=docs_url,
    )

    @server.feature(types.INITIALIZE)
    @_safe(None)
    def initialize(ls: MimirServer, params: types.InitializeParams) -> None:
        root = params.root_uri or (
            params.workspace_folders[0].uri if params.workspace_folders else None
        )
        if root:
            ls.root = Path(path_of(root))
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("docsUrl"), str):
            ls.docs_url = options["docsUrl"] or None

    @server.feature(types.INITIALIZED)
    def initialized(ls: MimirServer, params: types.InitializedParams) -> None:
        caps = ls.client_capabilities.workspace
        watch = caps.did_change_watched_files if caps else None
        if watch is None or not watch.dynamic_registration:
            return
        watchers = [
            types.FileSystemWatcher(glob_pattern=g)
            for g in ("**/*.py", "**/pyproject.toml", "**/mimir.toml")
        ]
        ls.client_register_capability(
            types.RegistrationParams(
                [
                    types.Registration(
                        "mimir-watch",
                        types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                        types.DidChangeWatchedFilesRegistrationOptions(watchers),
                    )
                ]
            )
        )

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @_safe(None)
    def did_open(ls: MimirServer, params: types.DidOpenTextDocumentParams) -> None:
        d = params.text_document
        ls.schedule(d.uri, d.text, d.version, delay=0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @_safe(None)
    def did_change(ls: MimirServer, params: types.DidChangeTextDocumentParams) -> None:
        d = params.text_document
        text = ls.workspace.get_text_document(d.uri).source
        ls.schedule(d.uri, text, d.version)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=True))
    @_safe(None)
    def did_save(ls: MimirServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        doc = ls.documents.get(uri)
        text = (
            params.text if params.text is not None else ls.workspace.get_text_document(uri).source
        )
        ls.schedule(uri, text, doc.version if doc else None, delay=0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @_safe(None)
    def did_close(ls: MimirServer, params: types.DidCloseTextDocumentParams) -> None:
        doc = ls.documents.pop(params.text_document.uri, None)
        if doc is not None:
            doc.generation += 1
            if doc.task is not None:
                doc.task.cancel()
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )
        if doc is not None:  # its unsaved text is gone: importers see the file on disk again
            ls.recheck_dependents(doc.path)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    @_safe(None)
    def watched(ls: MimirServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(c.uri.endswith((".toml",)) for c in params.changes):
            ls.forget_configs()
        ls.recheck_all()

    @server.command("mimir.stats")
    def stats(ls: MimirServer, *args: Any) -> dict[str, int]:
        """How much work the server did: file checks run, kernels proven (not from cache)."""
        return {"checks": ls.checks_run, "kernels_proven": ls._kernel_cache.stores}

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @_safe(None)
    async def hover(ls: MimirServer, params: types.HoverParams) -> types.Hover | None:
        found = await ls.checked(params.text_document.uri)
        if found is None:
            return None
        doc, result = found
        lines = doc.lines
        line, col = lines.point(params.position)
        answer = query.hover(result, lines.lines, line, col)
        if answer is None:
            return None
        text, span = answer
        return types.Hover(
            types.MarkupContent(types.MarkupKind.Markdown, text), _range(lines, span)
        )

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    @_safe([])
    async def inlay(ls: MimirServer, params: types.InlayHintParams) -> list[types.InlayHint]:
        found = await ls.checked(params.text_document.uri)
        if found is None:
            return []
        doc, result = found
        lines = doc.lines
        first, last = params.range.start.line + 1, params.range.end.line + 1
        return [
            types.InlayHint(lines.position(line, col), label, kind=types.InlayHintKind.Type)
            for line, col, label in query.inlay_hints(result)
            if first <= line <= last
        ]

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    @_safe([])
    async def code_action(
        ls: MimirServer, params: types.CodeActionParams
    ) -> list[types.CodeAction]:
        found = await ls.checked(params.text_document.uri)
        if found is None:
            return []
        doc, result = found
        lines = doc.lines
        out = []
        for d in doc.diagnostics:
            lsp_range = lines.range(d.span)
            if not _overlaps(lsp_range, params.range):
                continue
            lsp_diag = to_lsp(d, doc.uri, lines, doc.others, ls.docs_url)
            for fix in actions.fixes(result, lines.lines, d):
                edits = [types.TextEdit(lines.range(e.span), e.text) for e in fix.edits]
                out.append(
                    types.CodeAction(
                        title=fix.title,
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[lsp_diag],
                        is_preferred=fix.preferred or None,
                        edit=types.WorkspaceEdit(changes={doc.uri: edits}),
                    )
                )
        return out

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    @_safe(None)
    async def definition(ls: MimirServer, params: types.DefinitionParams) -> types.Location | None:
        found = await ls.checked(params.text_document.uri)
        if found is None:
            return None
        doc, result = found
        lines = doc.lines
        line, col = lines.point(params.position)
        span = query.definition(result, lines.lines, line, col)
        if span is None:
            return None
        if span.path == doc.path:
            return types.Location(doc.uri, lines.range(span))
        other = Lines(Path(span.path).read_text(encoding="utf-8"))
        return types.Location(uri_of(span.path), other.range(span))

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    @_safe([])
    async def document_symbol(
        ls: MimirServer, params: types.DocumentSymbolParams
    ) -> list[types.DocumentSymbol]:
        found = await ls.checked(params.text_document.uri)
        if found is None or found[1].info is None:
            return []
        doc, result = found
        lines = doc.lines
        kinds = {
            "kernel": types.SymbolKind.Function,
            "function": types.SymbolKind.Function,
            "dim": types.SymbolKind.TypeParameter,
            "constant": types.SymbolKind.Constant,
        }
        return [
            types.DocumentSymbol(
                name=s.name,
                kind=kinds[s.kind],
                range=lines.range(s.span),
                selection_range=lines.range(s.name_span),
                detail=s.detail,
            )
            for s in query.symbols(result.info)
        ]

    return server


def _in_this_file(d: Diagnostic, path: str) -> Diagnostic:
    """A failure inside a function imported from another module, shown at its call here.

    An editor shows a document's diagnostics in that document only; the place inside
    the callee (where `mimir check` reports it) becomes related information.
    """
    if d.span.path == path:
        return d
    calls = [label for label in d.labels if label.span.path == path]
    if not calls:
        return d
    call = calls[-1]
    inside = Label(d.span, "fails here, inside the called function")
    rest = tuple(label for label in d.labels if label is not call)
    return replace(d, span=call.span, labels=(inside, *rest))


def _overlaps(a: types.Range, b: types.Range) -> bool:
    a0, a1 = (a.start.line, a.start.character), (a.end.line, a.end.character)
    b0, b1 = (b.start.line, b.start.character), (b.end.line, b.end.character)
    return a0 <= b1 and b0 <= a1


def serve(
    tcp: bool = False,
    host: str = "127.0.0.1",
    port: int = 2087,
    z3_timeout: int | None = None,
    debounce: float = DEFAULT_DEBOUNCE_S,
    docs_url: str | None = None,
) -> int:
    """Run the server over stdio (the default) or TCP; the exit status (stdio: 0 after
    `shutdown` and `exit`, 1 otherwise; TCP serves until it is stopped)."""
    logging.basicConfig(level=logging.WARNING, format="mimir lsp: %(message)s")
    if tcp:
        return asyncio.run(_serve_tcp(host, port, z3_timeout, debounce, docs_url))
    return asyncio.run(_serve_stdio(z3_timeout, debounce, docs_url))


class _StreamWriter:
    """pygls' writer interface over a binary stream or a socket's transport."""

    def __init__(self, write: Callable[[bytes], Any], flush: Callable[[], Any] = lambda: None):
        self._write, self._flush = write, flush

    def write(self, data: bytes) -> None:
        self._write(data)
        self._flush()

    def close(self) -> None:
        pass


async def _serve_stdio(z3_timeout: int | None, debounce: float, docs_url: str | None) -> int:
    server = build_server(z3_timeout=z3_timeout, debounce=debounce, docs_url=docs_url)
    out = sys.stdout.buffer
    writer = _StreamWriter(out.write, out.flush)
    server.protocol.set_writer(writer)
    chunks: asyncio.Queue[bytes] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    fd = sys.stdin.buffer.fileno()

    def pump() -> None:  # a daemon thread: a blocked read never holds up the exit
        while True:
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                data = b""
            loop.call_soon_threadsafe(chunks.put_nowait, data)
            if not data:
                return

    threading.Thread(target=pump, name="mimir-lsp-stdin", daemon=True).start()
    try:
        return await Session(server.protocol, writer.write).run(chunks.get)
    except BrokenPipeError:
        return 1  # the client is gone
    finally:
        server.close()


async def _serve_tcp(
    host: str, port: int, z3_timeout: int | None, debounce: float, docs_url: str | None
) -> int:
    checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mimir-check")
    kernel_cache = _LRU(_KERNEL_CACHE_SIZE)

    async def connection(reader: asyncio.StreamReader, stream: asyncio.StreamWriter) -> None:
        server = build_server(
            z3_timeout, debounce, checker=checker, kernel_cache=kernel_cache, docs_url=docs_url
        )
        writer = _StreamWriter(stream.write)
        server.protocol.set_writer(writer)
        try:
            await Session(server.protocol, writer.write).run(lambda: reader.read(1 << 16))
        except (ConnectionError, OSError):
            pass  # the client is gone; the other sessions go on
        finally:
            server.close()
            stream.close()

    listener = await asyncio.start_server(connection, host, port)
    async with listener:
        await listener.serve_forever()
    return 0
