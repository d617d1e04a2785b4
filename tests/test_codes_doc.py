"""docs/codes.md, the target of the language server's `codeDescription` links, is current."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_code_description_links_point_at_the_generated_reference():
    from mimir.diagnostics.codes import REGISTRY
    from mimir.diagnostics.docs import markdown
    from mimir.lsp.convert import DOCS_URL

    page = (ROOT / "docs" / "codes.md").read_text(encoding="utf-8")
    assert page == markdown(), "regenerate: python -m mimir.diagnostics.docs > docs/codes.md"
    assert DOCS_URL.split("#")[0].endswith("docs/codes.md")
    for code in REGISTRY:
        assert f"\n## {code}\n" in page  # the heading whose anchor is #gpuNNN
