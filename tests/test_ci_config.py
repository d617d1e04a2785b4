"""Configuration: discovery, validation naming the key, precedence, globs and filters."""

from __future__ import annotations

from pathlib import Path

import pytest
from ci_tree import MATMUL, SLICES, make_tree, mimir

from mimir.gate.config import (
    DEFAULT_Z3_TIMEOUT_MS,
    Config,
    ConfigError,
    find_config_file,
    glob_match,
    load_config,
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MIMIR_CACHE_DIR", raising=False)
    make_tree(
        tmp_path,
        {
            "kernels/matmul.py": MATMUL,
            "kernels/slices.py": SLICES,
            "legacy/old.py": MATMUL,
            "scripts/tool.py": SLICES,
        },
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def codes_found(*args: str) -> list[tuple[str, str]]:
    """(path, code) for each diagnostic of `mimir check --format concise ARGS`."""
    out = []
    for line in mimir("check", "--no-cache", "--format", "concise", *args).stdout.splitlines():
        if ": error[" in line or ": warning[" in line:
            path = line.split(":", 1)[0]
            code = line.split("[", 1)[1].split("]", 1)[0]
            out.append((path, code))
    return out


def test_default_z3_timeout_matches_the_prover() -> None:
    from mimir.solve.prover import DEFAULT_TIMEOUT_MS

    assert DEFAULT_Z3_TIMEOUT_MS == DEFAULT_TIMEOUT_MS


def test_discovery_walks_upward_and_prefers_mimir_toml(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.mimir]\nz3-timeout = 100\n")
    sub = project / "kernels"
    assert find_config_file(sub) == project / "pyproject.toml"
    assert load_config(start=sub).z3_timeout == 100
    assert load_config(start=sub).root == project.resolve()
    (project / "mimir.toml").write_text("z3-timeout = 200\n")
    assert find_config_file(sub) == project / "mimir.toml"
    assert load_config(start=sub).z3_timeout == 200


def test_pyproject_without_tool_mimir_is_passed_over(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.mimir]\nz3-timeout = 100\n")
    inner = project / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    assert find_config_file(inner) == project / "pyproject.toml"


def test_no_config_gives_defaults_rooted_at_start(tmp_path: Path) -> None:
    config = load_config(start=tmp_path)
    assert config == Config()
    assert config.root == tmp_path.resolve()
    assert config.backends == ("msl", "wgsl", "ptx", "spirv")


def test_every_key_parses(project: Path) -> None:
    (project / "mimir.toml").write_text(
        'include = ["kernels/**/*.py"]\n'
        'exclude = ["legacy"]\n'
        'select = ["GPU01", "GPU090"]\n'
        'ignore = ["gpu018"]\n'
        'backends = ["wgsl", "spirv"]\n'
        "z3-timeout = 1234\n"
        '[per-file-ignores]\n"scripts/*.py" = ["GPU011"]\n'
    )
    config = load_config()
    assert config.include == ("kernels/**/*.py",)
    assert config.exclude == ("legacy",)
    assert config.select == ("GPU01", "GPU090")
    assert config.ignore == ("GPU018",)
    assert config.per_file_ignores == (("scripts/*.py", ("GPU011",)),)
    assert config.backends == ("wgsl", "spirv")
    assert config.z3_timeout == 1234
    assert config.source == project / "mimir.toml"


@pytest.mark.parametrize(
    ("body", "names"),
    [
        ("z3_timeout = 5", ["`z3_timeout`", "did you mean `z3-timeout`"]),
        ("colour = 1", ["unknown key `colour`"]),
        ('z3-timeout = "5"', ["`z3-timeout`", "positive integer"]),
        ("z3-timeout = 0", ["`z3-timeout`"]),
        ("z3-timeout = true", ["`z3-timeout`"]),
        ('select = ["GPU999"]', ["`select`", "`GPU999`"]),
        ('ignore = "GPU011"', ["`ignore`", "list of strings"]),
        ("include = [1]", ["`include`"]),
        ('exclude = "legacy"', ["`exclude`"]),
        ('exclude = [""]', ["`exclude`"]),
        ('backends = ["cuda"]', ["`backends`", "`cuda`"]),
        ('per-file-ignores = ["a"]', ["`per-file-ignores`"]),
        ('per-file-ignores = { "a.py" = ["XX"] }', ['`per-file-ignores."a.py"`', "`XX`"]),
        ("select = [", ["invalid TOML"]),
    ],
)
def test_bad_config_is_exit_2_naming_the_key(project: Path, body: str, names: list[str]) -> None:
    (project / "pyproject.toml").write_text(f"[tool.mimir]\n{body}\n")
    with pytest.raises(ConfigError) as err:
        load_config()
    for name in names:
        assert name in str(err.value)
    assert "pyproject.toml" in str(err.value)
    result = mimir("check", "kernels")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert names[0] in result.stderr


def test_config_flag_names_the_file(project: Path) -> None:
    (project / "ci.toml").write_text("z3-timeout = 10\n")
    assert mimir("check", "--config", "ci.toml", "kernels").exit_code == 1
    assert mimir("check", "--config", "nope.toml", "kernels").exit_code == 2
    (project / "bad.toml").write_text("nope = 1\n")
    result = mimir("check", "--config", "bad.toml", "kernels")
    assert result.exit_code == 2
    assert "unknown key `nope`" in result.stderr


def test_select_and_ignore_from_file_and_flags(project: Path) -> None:
    assert codes_found("kernels") == [
        ("kernels/matmul.py", "GPU011"),
        ("kernels/slices.py", "GPU018"),
    ]
    (project / "mimir.toml").write_text('ignore = ["GPU011"]\n')
    assert codes_found("kernels") == [("kernels/slices.py", "GPU018")]
    # A flag replaces the configured list.
    assert codes_found("--ignore", "GPU018", "kernels") == [("kernels/matmul.py", "GPU011")]
    assert codes_found("--select", "GPU011,GPU018", "--ignore", "GPU01", "kernels") == []
    (project / "mimir.toml").write_text('select = ["GPU018"]\n')
    assert codes_found("kernels") == [("kernels/slices.py", "GPU018")]
    assert codes_found("--select", "GPU011", "kernels") == [("kernels/matmul.py", "GPU011")]
    # Filtered findings do not fail the run.
    assert mimir("check", "--select", "GPU05", "kernels").exit_code == 0


def test_bad_code_on_the_command_line_names_the_flag(project: Path) -> None:
    result = mimir("check", "--ignore", "GPU011,BOGUS", "kernels")
    assert result.exit_code == 2
    assert "`--ignore`" in result.stderr and "`BOGUS`" in result.stderr


def test_z3_timeout_flag_overrides_file(project: Path) -> None:
    (project / "mimir.toml").write_text("z3-timeout = 7\n")
    config = load_config().override(z3_timeout=None)
    assert config.z3_timeout == 7
    assert config.override(z3_timeout=9).z3_timeout == 9
    assert mimir("check", "--z3-timeout", "0", "kernels").exit_code == 2


def test_per_file_ignores(project: Path) -> None:
    (project / "mimir.toml").write_text(
        '[per-file-ignores]\n"scripts/*.py" = ["GPU018"]\n"old.py" = ["GPU"]\n'
    )
    assert codes_found(".") == [
        ("kernels/matmul.py", "GPU011"),
        ("kernels/slices.py", "GPU018"),
    ]


def test_exclude_and_include_globs(project: Path) -> None:
    everything = codes_found(".")
    assert {p for p, _ in everything} == {
        "kernels/matmul.py",
        "kernels/slices.py",
        "legacy/old.py",
        "scripts/tool.py",
    }
    (project / "mimir.toml").write_text('exclude = ["legacy", "scripts/*.py"]\n')
    assert {p for p, _ in codes_found(".")} == {"kernels/matmul.py", "kernels/slices.py"}
    (project / "mimir.toml").write_text('include = ["kernels/**/m*.py"]\n')
    assert {p for p, _ in codes_found(".")} == {"kernels/matmul.py"}
    # --exclude replaces the configured list.
    assert {p for p, _ in codes_found("--exclude", "kernels", ".")} == set()


def test_named_files_bypass_exclude_unless_forced(project: Path) -> None:
    (project / "mimir.toml").write_text('exclude = ["legacy"]\n')
    assert codes_found("legacy/old.py") == [("legacy/old.py", "GPU011")]
    assert codes_found("--force-exclude", "legacy/old.py") == []
    result = mimir("check", "--force-exclude", "legacy/old.py")
    assert result.exit_code == 0
    assert result.stdout == "Success: no issues found in 0 source files\n"


def test_globs_are_relative_to_the_config_root(project: Path, monkeypatch) -> None:
    (project / "mimir.toml").write_text('exclude = ["kernels/slices.py"]\n')
    monkeypatch.chdir(project / "kernels")
    assert codes_found(".") == [("matmul.py", "GPU011")]


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("legacy", "legacy/old.py", True),
        ("legacy", "src/legacy/deep/old.py", True),
        ("legacy", "legacyish/old.py", False),
        ("*.py", "a/b/c.py", True),
        ("*_test.py", "a/b_test.py", True),
        ("*_test.py", "a/b_test.pyi", False),
        ("scripts/*.py", "scripts/tool.py", True),
        ("scripts/*.py", "scripts/sub/tool.py", False),
        ("scripts/*.py", "src/scripts/tool.py", False),
        ("scripts/**/*.py", "scripts/tool.py", True),
        ("scripts/**/*.py", "scripts/a/b/tool.py", True),
        ("scripts/**", "scripts/a/b/tool.py", True),
        ("./scripts/", "scripts/tool.py", True),
        ("/scripts", "scripts/tool.py", True),
        ("k?.py", "k1.py", True),
        ("k[0-9].py", "k7.py", True),
        ("k[!0-9].py", "k7.py", False),
        ("tests/fixtures", "tests/fixtures/check/bad.py", True),
        ("tests/fixtures", "tests/fixtures_other/bad.py", False),
    ],
)
def test_glob_match(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern, path) is expected
