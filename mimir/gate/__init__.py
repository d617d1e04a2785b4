"""The CI gate around the checker: what `mimir check` over a tree adds to checking a file.

- `config`: the project's configuration (`mimir.toml`, `[tool.mimir]`), found as ruff finds
  its own;
- `discover`: the Python files under the given paths;
- `runner`: which of them to check, the result cache, the workers and the progress;
- `cache`: one file's diagnostics keyed by the hash of its text and imports, authenticated;
- `baseline`: the findings a project adopted Mimir with, so that only new ones fail;
- `suppressions`: `# mimir: ignore[CODE]` comments.

`discover` and `suppressions` are leaves that the checker itself (`mimir.check`) uses too;
the rest sit above the checker and call it.
"""
