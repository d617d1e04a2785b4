"""docs/codes.md, the target of the language server's `codeDescription` links, is current."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_code_description_links_point_at_the_generated_reference():
    from mimir.diagnostics.codes import REGISTRY
    from mimir.diagnostics.docs import markdown
    from mimir.lsp.convert import CODES_PAGE, docs_link

    page = (ROOT / "docs" / "codes.md").read_text(encoding="utf-8")
    assert page == markdown(), "regenerate: python -m mimir.diagnostics.docs --write"
    # the page the server links to by default is installed with the package, and the same
    assert CODES_PAGE.read_text(encoding="utf-8") == page
    assert docs_link("GPU011") == CODES_PAGE.as_uri() + "#gpu011"
    assert "OWNER" not in docs_link("GPU011")
    template = "https://docs.example.org/mimir/codes.html#{code}"
    assert docs_link("GPU011", template) == "https://docs.example.org/mimir/codes.html#gpu011"
    assert docs_link("GPU011", "https://x.org/codes") == "https://x.org/codes#gpu011"
    for code in REGISTRY:
        assert f"\n## {code}\n" in page  # the heading whose anchor is #gpuNNN


def test_the_codes_page_is_package_data() -> None:
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "codes.md" in data["package-data"]["mimir.diagnostics"]
