"""The language server (`mimir lsp`): LSP over the same checker as `mimir check`.

`server` holds the protocol handlers and scheduling; `convert` maps spans and
diagnostics to LSP types; `query` answers hovers, inlay hints, symbols and
definitions from the checker's results; `actions` builds the quick fixes.
"""
