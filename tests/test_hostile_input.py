"""Hostile input never stops a run, never hangs, never writes outside its folder (issue 10).

One bad file gets its own coded diagnostic and the run reports every other file; an
unusable setting is exit 2 naming it; "internal error" or a traceback is always a bug.
The cache folder is not trusted: entries are authenticated and validated on read.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ci_tree import mimir as mimir_inprocess

from mimir.check import check_source
from mimir.diagnostics.diagnostic import Diagnostic, Span
from mimir.gate import cache as cache_module
from mimir.gate.cache import Cache, cache_dir
from mimir.gate.runner import _cache_settings
from mimir.parse.depth import MAX_EXPRESSION_DEPTH

REPO = Path(__file__).resolve().parent.parent
BAD_MATMUL = (REPO / "examples" / "bad_matmul.py").read_text()
MLP = (REPO / "examples" / "ok" / "mlp.py").read_text()
HEAD = "from mimir.array import Tensor, float32, gpu\n\n\n@gpu\n"
KERNEL = HEAD + "def k(x: Tensor[float32, 4]) -> Tensor[float32, 4]:\n    return "


@pytest.fixture(autouse=True)
def _private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test has its own cache secret and no inherited cache settings."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("MIMIR_CACHE_SECRET", raising=False)
    monkeypatch.delenv("MIMIR_CACHE_DIR", raising=False)


def run(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MIMIR_TRACEBACK"}
    env["NO_COLOR"] = "1"
    result = subprocess.run(
        [sys.executable, "-m", "mimir", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    both = result.stdout + result.stderr
    assert "Traceback" not in both and "internal error" not in both, both[-2000:]
    return result


def _codes_by_file(stdout: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for d in json.loads(stdout)["diagnostics"]:
        out.setdefault(Path(d["span"]["path"]).name, set()).add(d["code"])
    return out


# ------------------------------------------------------------ 1. deep expressions


def _sum_of_params(n: int) -> str:
    params = ", ".join(f"p{i}: Tensor[float32, 4]" for i in range(n))
    body = " + ".join(f"p{i}" for i in range(n))
    return HEAD + f"def k({params}) -> Tensor[float32, 4]:\n    return {body}\n"


def _at_depth(kind: str, depth: int) -> str:
    """A kernel whose returned expression nests exactly `depth` expressions deep."""
    if kind == "add":  # x + x + ... : n terms nest n deep
        return KERNEL + " + ".join(["x"] * depth) + "\n"
    if kind == "ones":  # x * (1.0 + ... ): one level for the product
        return KERNEL + "x * (" + " + ".join(["1.0"] * (depth - 1)) + ")\n"
    return KERNEL + "-" * (depth - 1) + "x\n"  # unary minus


def test_the_limit_is_at_least_what_cpython_compiles() -> None:
    """With default settings CPython compiles a chain only so deep; Mimir takes at least that."""
    probe = (
        "import sys\n"
        "lo, hi = 1, 20000\n"
        "while lo < hi:\n"
        "    mid = (lo + hi + 1) // 2\n"
        "    try:\n"
        "        compile('x = ' + '+'.join(['1'] * mid), 'p', 'exec')\n"
        "        lo = mid\n"
        "    except (RecursionError, MemoryError, SyntaxError):\n"
        "        hi = mid - 1\n"
        "print(lo)\n"
    )
    accepted = int(
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout
    )
    # `x = 1 + ... + 1` with `accepted` terms nests `accepted` expressions deep.
    assert MAX_EXPRESSION_DEPTH >= accepted


def test_expressions_at_the_limit_check_clean_through_the_cli(tmp_path: Path) -> None:
    for kind in ("add", "ones", "neg"):
        (tmp_path / f"{kind}.py").write_text(_at_depth(kind, MAX_EXPRESSION_DEPTH))
    (tmp_path / "params.py").write_text(_sum_of_params(500))
    (tmp_path / "bad.py").write_text(BAD_MATMUL)
    result = run("check", "--no-cache", "--format", "json", ".", cwd=tmp_path, timeout=600)
    assert result.returncode == 1, result.stderr
    assert _codes_by_file(result.stdout) == {"bad.py": {"GPU011"}}
    assert json.loads(result.stdout)["summary"]["files_checked"] == 5


def test_deeper_expressions_are_gpu004_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "add.py").write_text(_at_depth("add", MAX_EXPRESSION_DEPTH + 1))
    (tmp_path / "ones.py").write_text(KERNEL + "x * (" + " + ".join(["1"] * 5000) + ")\n")
    (tmp_path / "neg.py").write_text(KERNEL + "-" * 5000 + "x\n")
    (tmp_path / "bad.py").write_text(BAD_MATMUL)
    result = run("check", "--no-cache", "--format", "json", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert _codes_by_file(result.stdout) == {
        "add.py": {"GPU004"},
        "ones.py": {"GPU004"},
        "neg.py": {"GPU004"},
        "bad.py": {"GPU011"},
    }
    deep = [d for d in json.loads(result.stdout)["diagnostics"] if d["code"] == "GPU004"]
    assert all(d["span"]["line"] == 6 and d["span"]["column"] == 12 for d in deep)


def test_the_depth_walk_skips_only_statements_too_short_to_nest_that_deep() -> None:
    # `too_deep` with the source lines walks only statements long enough to hold a deeper
    # nest (the language server's path); it must find exactly what the full walk finds,
    # wherever the deep expression sits: a decorator, a default, a nested body, a handler.
    import ast

    from mimir.parse.depth import too_deep
    from mimir.parse.spans import split_lines

    limit = 40
    deep = "-" * (limit + 5) + "x"
    places = [
        f"y = {deep}\n",
        f"@dec({deep})\ndef f():\n    pass\n",
        f"def f(a={deep}):\n    pass\n",
        f"class C:\n    def m(self):\n        if True:\n            return {deep}\n",
        f"try:\n    pass\nexcept E:\n    z = {deep}\n",
        f"while {deep}:\n    pass\n",
        f"y = {'-' * (limit - 1)}x\n",  # exactly at the limit: nothing
    ]
    for text in places:
        tree = ast.parse("a = 1\n" + text + "b = 2\n")
        lines = split_lines("a = 1\n" + text + "b = 2\n")
        full = too_deep(tree, limit)
        assert too_deep(tree, limit, lines) == full, text
        assert bool(full) == (text != places[-1]), text


def test_a_file_pythons_parser_gives_up_on_is_gpu001(tmp_path: Path) -> None:
    result = check_source("deep.py", "x = " + "-" * 100_000 + "1\n")
    assert [d.code for d in result.diagnostics] == ["GPU001"] and result.unreadable
    assert "nested too deeply" in result.diagnostics[0].message
    (tmp_path / "deep.py").write_text("x = " + "-" * 100_000 + "1\n")
    (tmp_path / "bad.py").write_text(BAD_MATMUL)
    result = run("check", "--no-cache", "--format", "json", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert _codes_by_file(result.stdout) == {"deep.py": {"GPU001"}, "bad.py": {"GPU011"}}


INDEX_KERNEL = (
    "from mimir.array import Dim, Tensor, float32, gpu, program_id\n\n"
    'N = Dim("N")\n\n\n'
    "@gpu(grid=(N,))\n"
    "def shift(x: Tensor[float32, N], out: Tensor[float32, N]):\n"
    "    i = program_id(0)\n"
    "    out[i] = "
)


@pytest.mark.parametrize(
    "source, spv",
    [
        (_at_depth("add", MAX_EXPRESSION_DEPTH), "k_0_ew.spv"),
        # out[i] = -...-x[i]: the subscript, its name and index add three levels
        (INDEX_KERNEL + "-" * (MAX_EXPRESSION_DEPTH - 2) + "x[i]\n", "shift_0_grid.spv"),
    ],
    ids=["tensor", "index"],
)
def test_compile_gpu_at_the_limit(tmp_path: Path, source: str, spv: str) -> None:
    (tmp_path / "k.py").write_text(source)
    result = run("compile-gpu", "--backend", "all", "k.py", "-o", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    binary = tmp_path / "out" / "spirv" / spv
    assert binary.stat().st_size > 0
    assert (tmp_path / "out" / "wgsl" / spv.replace(".spv", ".wgsl")).exists()
    if shutil.which("spirv-val"):
        val = subprocess.run(["spirv-val", str(binary)], capture_output=True, text=True)
        assert val.returncode == 0, val.stdout + val.stderr


def test_walking_kernel_ir_is_iterative() -> None:
    """A recursive generator costs one frame per level for every item: quadratic, then a crash."""
    from mimir.codegen.ir import Binary, Var, walk_expr

    leaf = Var("x", "f32")
    chain = leaf
    for _ in range(50_000):
        chain = Binary("+", chain, leaf, "f32")
    nodes = list(walk_expr(chain))
    assert len(nodes) == 100_001 and nodes[0] is chain and nodes[-1] is leaf


# ------------------------------------------------- 2-4. files that are not files


def test_self_symlink_is_gpu002_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(BAD_MATMUL)
    (tmp_path / "loop.py").symlink_to("loop.py")
    result = run("check", "--no-cache", "--format", "json", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert _codes_by_file(result.stdout) == {"loop.py": {"GPU002"}, "bad.py": {"GPU011"}}
    assert "symbolic link" in result.stdout


def test_fifo_and_device_are_not_read(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(BAD_MATMUL)
    os.mkfifo(tmp_path / "x.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    result = run("check", "--no-cache", "--format", "json", ".", cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert _codes_by_file(result.stdout) == {
        "x.py": {"GPU002"},
        "zero.py": {"GPU002"},
        "bad.py": {"GPU011"},
    }
    messages = {d["message"] for d in json.loads(result.stdout)["diagnostics"]}
    assert "cannot read file: not a regular file (a named pipe)" in messages
    assert "cannot read file: not a regular file (a character device)" in messages


def test_files_over_the_size_limit_are_gpu003(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(BAD_MATMUL)
    (tmp_path / "big.py").write_text("x = 1\n" * 1000)
    result = run(
        "check", "--no-cache", "--max-file-size", "2K", "--format", "json", ".", cwd=tmp_path
    )
    assert result.returncode == 2
    assert _codes_by_file(result.stdout) == {"big.py": {"GPU003"}, "bad.py": {"GPU011"}}
    assert "skipped: too large (6,000 bytes; the limit is 2,048" in result.stdout
    # The same from the configuration file; `--ignore` cannot hide it.
    (tmp_path / "mimir.toml").write_text('max-file-size = "2K"\n')
    result = run("check", "--no-cache", "--ignore", "GPU", ".", cwd=tmp_path)
    assert result.returncode == 2 and "error[GPU003]" in result.stdout
    (tmp_path / "mimir.toml").write_text("max-file-size = 100000\n")
    assert run("check", "--no-cache", ".", cwd=tmp_path).returncode == 1


@pytest.mark.parametrize("value", ['"ten"', "0", "true", '"-1K"'])
def test_bad_max_file_size_is_a_usage_error(tmp_path: Path, value: str) -> None:
    (tmp_path / "mimir.toml").write_text(f"max-file-size = {value}\n")
    result = run("check", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 2 and "mimir.toml" in result.stderr
    assert "max-file-size" in result.stderr


def _deny_inside(monkeypatch: pytest.MonkeyPatch, locked: Path) -> None:
    """Make `locked` behave like a mode-000 folder for a non-root user (the tests run as root)."""

    def blocked(path: object) -> bool:
        try:
            p = Path(os.fsdecode(path)).absolute()
        except TypeError:  # a file descriptor
            return False
        return p == locked or locked in p.parents

    def inside(path: object) -> bool:
        try:
            return locked in Path(os.fsdecode(path)).absolute().parents
        except TypeError:
            return False

    def deny(real, test):
        def wrapper(path, *args, **kwargs):
            if test(path):
                raise PermissionError(errno.EACCES, "Permission denied", os.fsdecode(path))
            return real(path, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(os, "stat", deny(os.stat, inside))
    monkeypatch.setattr(os, "lstat", deny(os.lstat, inside))
    monkeypatch.setattr(os, "scandir", deny(os.scandir, blocked))
    monkeypatch.setattr(os, "listdir", deny(os.listdir, blocked))
    monkeypatch.setattr(os, "open", deny(os.open, blocked))


def test_unreadable_folder_is_gpu002_or_excluded(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "bad.py").write_text(BAD_MATMUL)
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "hidden.py").write_text(BAD_MATMUL)
    monkeypatch.chdir(tmp_path)
    _deny_inside(monkeypatch, (tmp_path / "locked").absolute())
    result = mimir_inprocess("check", "--no-cache", "--format", "json", ".")
    assert result.exit_code == 2, result.output
    assert _codes_by_file(result.stdout) == {"locked": {"GPU002"}, "bad.py": {"GPU011"}}
    assert "Permission denied" in result.stdout
    result = mimir_inprocess("check", "--no-cache", "--exclude", "locked", "--format", "json", ".")
    assert result.exit_code == 1, result.output
    assert _codes_by_file(result.stdout) == {"bad.py": {"GPU011"}}
    # A file named inside it, and reports written into it, are GPU002 and GPU005.
    result = mimir_inprocess("check", "--no-cache", "--format", "json", "locked/hidden.py")
    assert result.exit_code == 2, result.output
    assert _codes_by_file(result.stdout) == {"hidden.py": {"GPU002"}}
    result = mimir_inprocess("check", "--no-cache", "-o", "locked/sub/r.txt", "ok")
    assert result.exit_code == 2 and "error[GPU005]" in result.stderr


@pytest.mark.parametrize("kind", ["fifo", "device", "nested"])
def test_a_hostile_baseline_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    (tmp_path / "bad.py").write_text(BAD_MATMUL)
    base = tmp_path / "base.json"
    if kind == "fifo":
        os.mkfifo(base)
    elif kind == "device":
        base.symlink_to("/dev/zero")
    else:
        base.write_text("[" * 100_000 + "]" * 100_000)
    result = run("check", "--no-cache", "--baseline", "base.json", ".", cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "base.json" in result.stderr


# ------------------------------------------------------------ 5, 9. the cache


SPAN = Span("k.py", 3, 5, 3, 9)
SECRET = b"s" * 32


def _tampered_entries() -> list[tuple[str, object]]:
    good = {
        "code": "GPU011",
        "severity": "error",
        "message": "m",
        "why": "w",
        "fix": "f",
        "span": {"path": "k.py", "line": 3, "column": 5, "end_line": 3, "end_column": 9},
        "labels": [],
        "counterexample": {},
        "function": None,
        "notes": [],
    }

    def diag(**changes: object) -> dict:
        return {"unreadable": False, "diagnostics": [{**good, **changes}]}

    return [
        ("counterexample list", diag(counterexample=[])),
        ("counterexample str", diag(counterexample={"N": "3"})),
        ("integer why", diag(why=7)),
        ("span missing a key", diag(span={"path": "k.py", "line": 3})),
        ("span line a string", diag(span={**good["span"], "line": "3"})),
        ("span line zero", diag(span={**good["span"], "line": 0})),
        ("span line a bool", diag(span={**good["span"], "line": True})),
        ("unknown code", diag(code="GPU999")),
        ("severity", diag(severity="fatal")),
        ("labels", diag(labels={"a": 1})),
        ("label span", diag(labels=[{"span": 1, "message": "x"}])),
        ("notes", diag(notes=[1])),
        ("function", diag(function=3)),
        ("extra key", diag(extra=1)),
        ("unreadable str", {"unreadable": "no", "diagnostics": []}),
        ("diagnostics dict", {"unreadable": False, "diagnostics": {}}),
        ("not an object", [1, 2]),
        ("deep JSON", "[" * 100_000 + "]" * 100_000),
        ("not the registry's why", diag()),
    ]


@pytest.mark.parametrize("name, data", _tampered_entries(), ids=lambda v: str(v)[:24])
def test_malformed_entries_with_a_valid_mac_are_misses(tmp_path: Path, name, data) -> None:
    """Even an authenticated entry (say, from a buggy older writer) is checked field by field."""
    store = Cache(tmp_path, {}, secret=SECRET)
    key = "c" * 64
    store.put(key, [Diagnostic("GPU011", "m", SPAN)], False)
    assert store.get(key) is not None
    payload = data.encode() if isinstance(data, str) else json.dumps(data).encode()
    mac = hmac.new(SECRET, key.encode() + b"\0" + payload, hashlib.sha256).hexdigest()
    store._file(key).write_bytes(mac.encode() + b"\n" + payload)
    assert store.get(key) is None


def _forge(root: Path, file: str, text: str, how: str) -> None:
    """Write the entry an attacker would: no diagnostics, at the key `mimir check` will use."""
    from mimir.gate.config import load_config

    config = load_config(start=root)
    key = Cache(root, _cache_settings(config), secret=None).key(file, text.encode())
    forger = Cache(cache_dir(root), _cache_settings(config), secret=b"guessed" * 5)
    forger.put(key, [], False)
    entry = forger._file(key)
    if how == "no mac":
        entry.write_bytes(entry.read_bytes().split(b"\n", 1)[1])
    elif how == "old format":
        entry.write_text('{"unreadable": false, "diagnostics": []}')
        old = cache_dir(root) / "v1" / key[:2] / f"{key}.json"
        old.parent.mkdir(parents=True)
        old.write_text('{"unreadable": false, "diagnostics": []}')


@pytest.mark.parametrize("how", ["wrong secret", "no mac", "old format"])
def test_a_forged_entry_cannot_make_bad_matmul_pass(tmp_path: Path, how: str) -> None:
    (tmp_path / "bad_matmul.py").write_text(BAD_MATMUL)
    _forge(tmp_path, "bad_matmul.py", BAD_MATMUL, how)
    result = run("check", "bad_matmul.py", cwd=tmp_path)
    assert result.returncode == 1 and "GPU011" in result.stdout
    # The real entry replaces the forgery and is served afterwards.
    again = run("check", "bad_matmul.py", cwd=tmp_path)
    assert again.returncode == 1 and again.stdout == result.stdout


def test_the_secret_lives_outside_the_cache_and_is_private(tmp_path: Path) -> None:
    (tmp_path / "bad_matmul.py").write_text(BAD_MATMUL)
    assert run("check", "bad_matmul.py", cwd=tmp_path).returncode == 1
    secret = tmp_path / "state" / "mimir" / "cache-secret"
    assert secret.stat().st_mode & 0o777 == 0o600
    assert len(secret.read_bytes()) == 32
    assert not any(
        secret.read_bytes() in p.read_bytes()
        for p in (tmp_path / ".mimir_cache").rglob("*")
        if p.is_file()
    )
    # A secret others can read is not used: the cache is off, the answer still right.
    secret.chmod(0o644)
    assert cache_module.cache_secret() is None
    shutil.rmtree(tmp_path / ".mimir_cache")
    assert run("check", "bad_matmul.py", cwd=tmp_path).returncode == 1
    assert not list((tmp_path / ".mimir_cache").rglob("*.json"))


@pytest.mark.parametrize("link", [".mimir_cache", ".mimir_cache/.gitignore", ".mimir_cache/v2"])
def test_the_cache_never_writes_through_a_planted_link(tmp_path: Path, link: str) -> None:
    """A repository can ship `.mimir_cache` with links in it; nothing outside may change."""
    (tmp_path / "bad.py").write_text(BAD_MATMUL)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / ".gitignore").write_text("mine\n")
    (tmp_path / link).parent.mkdir(parents=True, exist_ok=True)
    target = victim / ".gitignore" if link.endswith(".gitignore") else victim
    (tmp_path / link).symlink_to(target)
    before = _tree(victim)
    for _ in range(2):
        result = run("check", "bad.py", cwd=tmp_path)
        assert result.returncode == 1 and "GPU011" in result.stdout
    assert _tree(victim) == before


def test_a_ci_secret_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MIMIR_CACHE_SECRET", "from the ci secret store")
    first = cache_module.cache_secret()
    assert first is not None and not (tmp_path / "state").exists()
    monkeypatch.setenv("MIMIR_CACHE_SECRET", "another")
    assert cache_module.cache_secret() != first


# ------------------------------------------------------------ 6. configuration


@pytest.mark.parametrize(
    "content, words",
    [
        ('exclude = ["[z-a]"]\n', ["`exclude`", "[z-a]"]),
        ('include = ["[z-a].py"]\n', ["`include`", "[z-a]"]),
        ('per-file-ignores = { "[z-a]" = ["GPU011"] }\n', ["per-file-ignores", "[z-a]"]),
        (b'exclude = ["\xff"]\n', ["not UTF-8"]),
        ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", ["nested too deeply"]),
    ],
    ids=["exclude", "include", "per-file-ignores", "latin1", "nested"],
)
def test_unusable_configuration_is_exit_2_naming_it(tmp_path: Path, content, words) -> None:
    (tmp_path / "bad.py").write_text(BAD_MATMUL)
    config = tmp_path / "mimir.toml"
    if isinstance(content, bytes):
        config.write_bytes(content)
    else:
        config.write_text(content)
    result = run("check", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert str(config) in result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def test_bad_exclude_flag_is_exit_2(tmp_path: Path) -> None:
    result = run("check", "--no-cache", "--exclude", "[z-a]", ".", cwd=tmp_path)
    assert result.returncode == 2 and "`--exclude`" in result.stderr


def test_bracket_classes_are_literal_sets_without_warnings(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(BAD_MATMUL)
    (tmp_path / "mimir.toml").write_text('exclude = ["[[:alpha:]]"]\n')
    env = {**os.environ, "PYTHONWARNINGS": "error::FutureWarning"}
    result = subprocess.run(
        [sys.executable, "-m", "mimir", "check", "--no-cache", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "Warning" not in result.stderr, result.stderr
    assert result.returncode == 1  # `a.py` is no single character of the set: still checked
    from mimir.gate.config import glob_match

    assert glob_match("[[:alpha:]]", "a]") and not glob_match("[[:alpha:]]", "b]")
    assert glob_match("[!a-c].py", "d.py") and not glob_match("[!a-c].py", "b.py")


# ------------------------------------------------------------ 7-8. outputs


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if not p.is_symlink() else b"->")
        for p in sorted(root.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


def test_long_function_name_writes_nothing(tmp_path: Path) -> None:
    long = "f" * 300
    body = "(x: Tensor[float32, 8]) -> Tensor[float32, 8]:\n    return x * 2.0\n"
    (tmp_path / "k.py").write_text(HEAD + "def mlp" + body + "\n\n@gpu\ndef " + long + body)
    out = tmp_path / "out"
    out.mkdir()
    (out / "mlp.manifest.json").write_text("old")
    before = _tree(out)
    result = run("compile-gpu", "--backend", "all", "k.py", "-o", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert "error[GPU005]" in result.stderr and "file name too long" in result.stderr
    assert _tree(out) == before


@pytest.mark.parametrize(
    "args",
    [
        ["compile-gpu", "k.py", "-o", "afile"],
        ["compile-gpu", "k.py", "-o", "/proc/x"],
        ["compile-gpu", "k.py", "-o", "afile/sub"],
        ["check", "k.py", "-o", "/proc/x"],
        ["check", "k.py", "-o", "afile/report.txt"],
        ["check", "k.py", "-o", "adir"],
        ["check", "k.py", "--write-baseline", "/proc/x/b.json"],
        ["check", "k.py", "--write-baseline", "afile/b.json"],
    ],
    ids=lambda a: " ".join(a[2:]),
)
def test_unwritable_outputs_are_gpu005_exit_2(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "k.py").write_text(MLP)
    (tmp_path / "afile").write_text("keep")
    (tmp_path / "adir").mkdir()
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error[GPU005]: `"), result.stderr
    assert (tmp_path / "afile").read_text() == "keep"


def test_a_write_that_fails_midway_leaves_the_folder_as_it_was(tmp_path: Path, monkeypatch) -> None:
    from mimir import safeio

    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old a")
    real = safeio._stage
    calls = []

    def failing(target: Path, data: bytes) -> str:
        calls.append(target)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(target, data)

    monkeypatch.setattr(safeio, "_stage", failing)
    files = {out / "a.txt": "new a", out / "new" / "b.txt": b"b", out / "c.txt": "c"}
    with pytest.raises(safeio.OutputError, match="No space left on device"):
        safeio.write_all(files)
    assert _tree(out) == {"a.txt": b"old a"}
    assert sorted(p.name for p in out.iterdir()) == ["a.txt"]  # no temp files, no new folder


def test_outputs_never_follow_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "mlp.py").write_text(MLP)
    (tmp_path / "victim.txt").write_text("victim")
    out = tmp_path / "out"
    out.mkdir()
    (out / "mlp.manifest.json").symlink_to("../victim.txt")
    result = run("compile-gpu", "--backend", "msl", "mlp.py", "-o", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "victim.txt").read_text() == "victim"
    manifest = out / "mlp.manifest.json"
    assert not manifest.is_symlink() and json.loads(manifest.read_text())
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    # A linked folder inside the output would carry the write outside it: refused.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out2").mkdir()
    (tmp_path / "out2" / "msl").symlink_to("../elsewhere")
    result = run("compile-gpu", "--backend", "all", "mlp.py", "-o", "out2", cwd=tmp_path)
    assert result.returncode == 2 and "error[GPU005]" in result.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert [p.name for p in (tmp_path / "out2").iterdir()] == ["msl"]
    # Reports and baselines replace a link too.
    (tmp_path / "report.txt").symlink_to("victim.txt")
    (tmp_path / "base.json").symlink_to("victim.txt")
    assert run("check", "mlp.py", "-o", "report.txt", cwd=tmp_path).returncode == 0
    assert run("check", "mlp.py", "--write-baseline", "base.json", cwd=tmp_path).returncode == 0
    assert (tmp_path / "victim.txt").read_text() == "victim"
    assert not (tmp_path / "report.txt").is_symlink()
    assert not (tmp_path / "base.json").is_symlink()
