"""`benchmarks/mutation.py`: the score table and the survivor list read from mutmut's results."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("mutation", REPO / "benchmarks" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation"] = module
    spec.loader.exec_module(module)
    return module


def _meta(root: Path, unit: str, rel: str, codes: dict[str, int | None]) -> None:
    path = root / unit / "mutants" / f"{rel}.meta"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code_by_key": codes}))


def test_report_scores_each_package_and_lists_survivors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    m = _script()
    equivalent = tmp_path / "equivalent.txt"
    equivalent.write_text("# header\nmimir.ops.x_f__mutmut_4  # cannot be told apart\n")
    monkeypatch.setattr(m, "EQUIVALENT", equivalent)
    codes = {
        "mimir.ops.x_f__mutmut_1": 1,  # killed
        "mimir.ops.x_f__mutmut_2": 36,  # timeout
        "mimir.ops.x_f__mutmut_3": 0,  # survived
        "mimir.ops.x_f__mutmut_4": 0,  # survived, marked equivalent
        "mimir.ops.x_f__mutmut_5": 33,  # no test reaches it
        "mimir.ops.x_f__mutmut_6": None,  # not tested yet
    }
    _meta(tmp_path, "ops", "mimir/ops/a.py", codes)
    status = m._report(["ops", "constraints"], tmp_path, target=50.0)
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("mimir/ops"))
    # made 6, killed 1, timeout 1, equivalent 1, survived 1, untested 1, pending 1
    assert row.split()[1:8] == ["6", "1", "1", "1", "1", "1", "1"]
    assert row.endswith("50.0%")  # (1 + 1) / (6 - 1 equivalent - 1 pending)
    assert "mimir.ops.x_f__mutmut_3  [survived; unit ops]" in out
    assert "mimir.ops.x_f__mutmut_5  [no test; unit ops]" in out
    assert "mutmut_4" not in out.split("survivors")[1]
    assert status == 0
    assert m._report(["ops"], tmp_path, target=95.0) == 1


def test_every_unit_names_existing_modules_and_tests() -> None:
    m = _script()
    for unit in m.UNITS.values():
        for pattern in unit.modules:
            assert list(REPO.glob(pattern)), pattern
        for test in unit.tests:  # a file, or one test of it (`file::name`)
            assert (REPO / test.split("::")[0]).is_file(), test
