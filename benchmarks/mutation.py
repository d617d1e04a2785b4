"""Mutation testing of the checker, the shim and the code generator, with mutmut.

    python benchmarks/mutation.py [UNIT ...] [--jobs J] [--workdir DIR] [--fresh] [--sample N]
    python benchmarks/mutation.py --report [UNIT ...]     # table from the last runs only

A unit is a group of modules and the test files that cover them (`UNITS` below); only
those tests run against the unit's mutants, and mutmut narrows that further to the tests
that call the mutated function, so a full run fits in about an hour on 2 cores. Each
unit runs in its own copy of the tree (`--workdir`, default a folder under the system
temp directory), so the worktree is never mutated and an interrupted run leaves nothing
behind; a second run of the same unit resumes where the first stopped unless `--fresh`.
`--sample N` tests a seeded random N of each unit's mutants (every file in proportion)
instead of all of them, for a machine that cannot afford a full run; the table then
counts only the mutants tested (`pending` are the rest).

The table gives, per package, the mutants mutmut made, those killed (a test failed or
timed out), those marked equivalent in `benchmarks/mutation_equivalent.txt` (one
`mutant-name  # reason` a line), and the score: killed / (made - equivalent). Every
surviving mutant that is not marked equivalent is listed; `mutmut show NAME` in the
unit's work folder prints its diff. Exit status 0 when every package reached its
target (`--target`, default 95), 1 otherwise.

Tests that start `mimir` in a subprocess are left out of the mapping on purpose: the
subprocess would import the unmutated package, so they could never kill a mutant. The
codegen units run their backend's static tests only (snapshots of every zoo kernel,
ptxas, spirv-val, unit tests), not the zoo's executions on the PTX interpreter and wgpu
(`tests/test_ptx_exec.py`, `tests/test_spirv.py`'s wgpu runs, `test_spirv_control_flow.py`):
those take minutes a mutant on a shared 2-core machine, and any mutant that changes an
emitted byte of the zoo already fails a snapshot.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EQUIVALENT = REPO / "benchmarks" / "mutation_equivalent.txt"

# mutmut's exit codes for a mutant's test run (mutmut/stats.py).
_KILLED = {1, 3}  # a test failed
_TIMEOUT = {36, 24, -24, 152, 255}  # the tests ran past the limit: counted as killed, shown apart
_SURVIVED = {0}
_NO_TESTS = {5, 33}

# Imported once in mutmut's fork server; everything under `mimir` and the tests is
# imported fresh in each mutant's process, so no cache from an earlier run hides a kill.
_PRELOAD = ["z3", "networkx", "numpy", "hypothesis", "jsonschema", "yaml", "rich", "typer"]


@dataclass(frozen=True)
class Unit:
    package: str
    modules: tuple[str, ...]  # globs relative to the repository root
    tests: tuple[str, ...]


_CHECK_TESTS = (
    "tests/test_checker_messages.py",
    "tests/test_fixtures.py",
    "tests/test_registry.py",
    "tests/test_index_kernels.py",
    "tests/test_properties.py",
    "tests/test_solver_limits.py",
    "tests/test_projects.py",  # kernels called through helpers of other modules (devices.py)
)
_CODEGEN_TESTS = ("tests/test_codegen.py", "tests/test_compile_gate.py")
# The codegen units run the static tests of their backend only: the saved-output
# snapshots (every zoo kernel, every byte), the validators (ptxas, spirv-val) and the
# unit tests, not the executions of the zoo (PTX interpreter, wgpu), which cost minutes a
# mutant on a shared 2-core machine. A mutant that changes no emitted byte of the zoo
# survives them, and is triaged like any other survivor.
# test_codegen.py without its validators of the saved snapshots (naga, clang): they read
# files, not the compiler, so they can kill no mutant, but cost minutes in mutmut's runs
_CODEGEN_CORE_TESTS = (
    *(
        f"tests/test_codegen.py::{name}"
        for name in (
            "test_emitted_files_match_snapshots",
            "test_every_manifest_follows_the_schema",
            "test_the_schema_ships_in_the_package",
            "test_elementwise_chains_fuse_into_one_guarded_kernel",
            "test_matmul_is_tiled_with_its_epilogue_fused",
            "test_attention_is_three_launches_in_order_with_scratch",
            "test_reductions_have_no_size_cap",
            "test_reserved_words_are_renamed_and_the_manifest_keeps_python_names",
            "test_namer_keeps_legal_names_and_renames_the_rest",
            "test_bool_literals_are_spelled_true_and_false",
            "test_a_negative_int_literal_binds_as_a_unary_minus_and_zero_as_an_atom",
            "test_every_elementwise_op_has_a_lowering_and_every_backend_its_intrinsics",
            "test_dispatch_folds_past_65535_workgroups",
            "test_size_expressions_simplify",
            "test_backends_all_means_every_backend",
            "test_a_backend_limit_is_a_coded_refusal_that_writes_nothing",
            "test_an_unschedulable_kernel_is_a_coded_refusal",
            "test_sizes_past_32_bits_and_dim_named_parameters_are_refused",
            "test_a_backend_without_an_intrinsic_refuses_naming_the_op",
            "test_check_errors_come_first_and_nothing_is_compiled",
            "test_cli_writes_one_backend_into_the_folder",
            "test_cli_all_backends_write_per_backend_folders",
            "test_cli_without_output_prints_the_kernels",
            "test_cli_check_errors_exit_1_and_write_nothing",
            "test_cli_refusal_exits_1_and_writes_nothing",
            "test_cli_usage_errors_exit_2",
            "test_compile_file_reports_an_unreadable_file",
        )
    ),
    "tests/test_compile_gate.py",
)
_PTX_SNAPSHOTS = "tests/test_ptx.py::test_snapshots"
_SPIRV_SNAPSHOTS = "tests/test_spirv.py::test_modules_assembly_and_manifests_match_snapshots"
_SPIRV_STATIC = tuple(
    f"tests/test_spirv.py::{name}"
    for name in (
        "test_modules_assembly_and_manifests_match_snapshots",
        "test_every_module_passes_spirv_val_vulkan_1_1",
        "test_bindings_are_the_manifests_and_read_only_variables_are_non_writable",
        "test_float16_declares_its_capabilities_and_float32_does_not",
        "test_matmul_uses_workgroup_memory_and_barriers",
        "test_non_finite_constants_come_from_private_bits",
        "test_too_many_storage_buffers_is_a_coded_refusal",
        "test_index_level_plain_parameter_read_and_written_is_refused",
        "test_the_backend_refuses_what_it_cannot_hold",
        "test_an_ir_variable_used_outside_its_scope_is_named",
        "test_a_bool_cast_to_a_number_selects_one_or_zero",
    )
)

UNITS: dict[str, Unit] = {
    "ops": Unit("mimir/ops", ("mimir/ops/*",), (*_CHECK_TESTS, "tests/test_shim.py")),
    "constraints": Unit("mimir/constraints", ("mimir/constraints/*",), _CHECK_TESTS),
    "solve": Unit(
        "mimir/solve",
        ("mimir/solve/*",),
        ("tests/test_solver_limits.py", "tests/test_fixtures.py", "tests/test_ci_config.py"),
    ),
    "array": Unit(
        "mimir/array",
        ("mimir/array/*",),
        (
            "tests/test_shim.py",
            "tests/test_fixtures.py",
            "tests/test_registry.py",
            "tests/test_index_kernels.py",
            "tests/test_properties.py",
        ),
    ),
    "codegen-core": Unit(
        "mimir/codegen",
        (
            "mimir/codegen/[a-z]*.py",
            "mimir/codegen/schedule/*",
            "mimir/codegen/kernels/*",
            "mimir/codegen/passes/*",
            "mimir/codegen/backends/base.py",
        ),
        (*_CODEGEN_CORE_TESTS, _PTX_SNAPSHOTS, _SPIRV_SNAPSHOTS),
    ),
    "codegen-msl-wgsl": Unit(
        "mimir/codegen",
        ("mimir/codegen/backends/msl.py", "mimir/codegen/backends/wgsl.py"),
        _CODEGEN_TESTS,
    ),
    "codegen-ptx": Unit(
        "mimir/codegen",
        ("mimir/codegen/backends/ptx/*",),
        ("tests/test_ptx.py", "tests/test_ptx_math.py"),
    ),
    "codegen-spirv": Unit(
        "mimir/codegen",
        ("mimir/codegen/backends/spirv/*",),
        (*_SPIRV_STATIC, "tests/test_spirv_builder.py"),
    ),
}


def _toml_list(items: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def _prepare(unit_name: str, unit: Unit, work: Path, fresh: bool) -> None:
    """Copy the tracked and untracked-but-not-ignored files into `work`, with mutmut's config."""
    if fresh and work.exists():
        shutil.rmtree(work)
    files = (
        subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = REPO / rel
        if not src.is_file():
            continue
        dst = work / rel
        if dst.exists() and dst.read_bytes() == src.read_bytes():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        # mutmut keeps its own copy; a changed source must be mutated again
        stale = work / "mutants" / rel
        if stale.exists():
            stale.unlink()
            meta = stale.with_name(stale.name + ".meta")
            if meta.exists():
                meta.unlink()
    (work / "preload.txt").write_text("\n".join(_PRELOAD) + "\n")
    config = "\n".join(
        [
            "",
            "[tool.mutmut]",
            'source_paths = ["mimir"]',
            f"only_mutate = {_toml_list(unit.modules)}",
            f"pytest_add_cli_args_test_selection = {_toml_list(unit.tests)}",
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-x", "-q"]',
            'also_copy = ["examples", "docs", "README.md", "action.yml", "benchmarks"]',
            'process_isolation = "forkserver"',
            'forkserver_warmup = "import"',
            'preload_modules_file = "preload.txt"',
            # the limit is wall time: generous, so a loaded machine does not pass for a hang
            "timeout_multiplier = 10.0",
            "timeout_constant = 60.0",
            "",
        ]
    )
    pyproject = work / "pyproject.toml"
    text = (REPO / "pyproject.toml").read_text()
    pyproject.write_text(text + config)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    return env


# mutmut's own first steps of `mutmut run` (3.8): copy the tree into mutants/ and write
# every mutant, without running anything, so that a sample can be drawn from their names.
_GENERATE = """
from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants
import os
os.makedirs("mutants", exist_ok=True)
copy_src_dir()
copy_also_copy_files()
create_mutants(1)
"""


def _sample(work: Path, count: int) -> list[str]:
    """A seeded random `count` of the unit's untested mutants, each file in proportion."""
    if not any((work / "mutants").rglob("*.py.meta")):
        subprocess.run([sys.executable, "-c", _GENERATE], cwd=work, env=_env(), check=True)
    results = _results(work)
    done = sum(1 for code in results.values() if code is not None)
    names = sorted(name for name, code in results.items() if code is None)
    rng = random.Random(f"mimir-mutation:{work.name}")
    return sorted(rng.sample(names, min(len(names), max(0, count - done))))


def _survivors(work: Path) -> list[str]:
    equivalent = _equivalent()
    return sorted(
        name
        for name, code in _results(work).items()
        if code in _SURVIVED | _NO_TESTS and name not in equivalent
    )


def _run(unit_name: str, work: Path, jobs: int, names: list[str] | None) -> int:
    mutmut = Path(sys.executable).with_name("mutmut")
    print(f"== {unit_name}: mutmut run in {work}", flush=True)
    if names is not None and not names:
        return 0  # the sample is already tested
    command = [str(mutmut), "run", "--max-children", str(jobs), *(names or [])]
    return subprocess.run(command, cwd=work, env=_env(), check=False).returncode


def _results(work: Path) -> dict[str, int | None]:
    """mutant name -> exit code, from mutmut's `.meta` files."""
    out: dict[str, int | None] = {}
    for meta in sorted((work / "mutants").rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        out.update(data.get("exit_code_by_key", {}))
    return out


def _equivalent() -> dict[str, str]:
    marked: dict[str, str] = {}
    if not EQUIVALENT.exists():
        return marked
    for line in EQUIVALENT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition("#")
        marked[name.strip()] = reason.strip()
    return marked


def _report(names: list[str], root: Path, target: float) -> int:
    equivalent = _equivalent()
    rows: dict[str, dict[str, int]] = {}
    survivors: list[tuple[str, str, str]] = []
    for name in names:
        unit = UNITS[name]
        work = root / name
        if not (work / "mutants").exists():
            continue
        row = rows.setdefault(
            unit.package,
            {
                "made": 0,
                "killed": 0,
                "timeout": 0,
                "equivalent": 0,
                "survived": 0,
                "untested": 0,
                "pending": 0,
            },
        )
        for mutant, code in _results(work).items():
            row["made"] += 1
            if mutant in equivalent:
                row["equivalent"] += 1
            elif code in _KILLED:
                row["killed"] += 1
            elif code in _TIMEOUT:
                row["timeout"] += 1
            elif code is None:
                row["pending"] += 1
            else:
                kind = (
                    "survived"
                    if code in _SURVIVED
                    else "no test"
                    if code in _NO_TESTS
                    else f"exit {code}"
                )
                row["survived" if code in _SURVIVED else "untested"] += 1
                survivors.append((name, mutant, kind))
    if not rows:
        print("no mutation results yet")
        return 1
    header = f"{'package':<20} {'made':>6} {'killed':>7} {'timeout':>7} {'equiv':>6} {'surv':>5} "
    header += f"{'untested':>8} "
    header += f"{'pending':>7} {'score':>7}"
    print(header)
    worst = 100.0
    for package, row in rows.items():
        counted = row["made"] - row["equivalent"] - row["pending"]
        score = 100.0 * (row["killed"] + row["timeout"]) / counted if counted else 100.0
        worst = min(worst, score)
        print(
            f"{package:<20} {row['made']:>6} {row['killed']:>7} {row['timeout']:>7} "
            f"{row['equivalent']:>6} "
            f"{row['survived']:>5} {row['untested']:>8} {row['pending']:>7} {score:>6.1f}%"
        )
    if survivors:
        print(f"\nsurvivors ({len(survivors)}), not marked equivalent:")
        for name, mutant, kind in survivors:
            print(f"  {mutant}  [{kind}; unit {name}]")
    stale = sorted(set(equivalent) - {m for n in names for m in _results(root / n)})
    if stale and all((root / n / "mutants").exists() for n in UNITS):
        print(f"\nmarked equivalent but not made any more: {', '.join(stale)}")
    return 0 if worst >= target else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("units", nargs="*", help=f"units to run (default all: {', '.join(UNITS)})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "mimir-mutation"
    )
    parser.add_argument("--fresh", action="store_true", help="drop earlier results of the units")
    parser.add_argument("--report", action="store_true", help="print the table, run nothing")
    parser.add_argument("--sample", type=int, help="test a seeded random N mutants per unit")
    parser.add_argument(
        "--retest", action="store_true", help="test the survivors again (after adding tests)"
    )
    parser.add_argument("--target", type=float, default=95.0)
    args = parser.parse_args(argv)
    names = args.units or list(UNITS)
    unknown = [n for n in names if n not in UNITS]
    if unknown:
        parser.error(f"unknown unit {unknown[0]!r}; units: {', '.join(UNITS)}")
    if not args.report:
        for name in names:
            work = args.workdir / name
            _prepare(name, UNITS[name], work, args.fresh)
            if args.retest:
                names_ = _survivors(work)
            elif args.sample is not None:
                names_ = _sample(work, args.sample)
            else:
                names_ = None
            code = _run(name, work, args.jobs, names_)
            if code != 0:
                print(f"== {name}: mutmut exited {code}", file=sys.stderr)
    return _report(names, args.workdir, args.target)


if __name__ == "__main__":
    sys.exit(main())
