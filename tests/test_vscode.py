"""The VS Code extension (editors/vscode) packages into a .vsix that starts `mimir lsp`.

`.ci/run` builds it (`npm ci && npm run package`) before the suite; locally the test
skips until it has been built once, under CI=true a missing package fails.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from harness import require

EXTENSION = Path(__file__).resolve().parent.parent / "editors" / "vscode"
VSIX = EXTENSION / "mimir-lsp.vsix"


def test_the_extension_packages_and_starts_the_server() -> None:
    require(VSIX.is_file(), f"{VSIX} is not built: run `npm ci && npm run package` there")
    with zipfile.ZipFile(VSIX) as z:
        names = set(z.namelist())
        manifest = json.loads(z.read("extension/package.json"))
        script = z.read("extension/out/extension.js").decode()
    assert manifest["main"] == "./out/extension.js"
    assert manifest["activationEvents"] == ["onLanguage:python"]
    command = manifest["contributes"]["configuration"]["properties"]["mimir.command"]
    assert command["default"] == ["mimir", "lsp"]
    # The compiled extension launches the configured command through vscode-languageclient,
    # which ships inside the package.
    assert "vscode-languageclient/node" in script and "TransportKind.stdio" in script
    assert "extension/node_modules/vscode-languageclient/package.json" in names
    # Packaged from the sources in the repository, not from an older build.
    assert json.loads((EXTENSION / "package.json").read_text())["version"] == manifest["version"]
