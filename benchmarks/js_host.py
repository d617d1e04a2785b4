"""The JavaScript host (js/) in Node on Dawn: time per call and per kernel of the web demo.

    python benchmarks/js_host.py [--batches 10,1000] [--repeat 5]

Runs examples/web/kernels/classify (matmul 64->16, ReLU, matmul 16->10, softmax) through
`load(...).run(...)` for each batch size B and prints, per B: the median wall time of one
`run()` call (input checks, uniform packing, upload, three dispatches, read-back) and each
launch submitted alone (`profile`). Needs `npm ci` in js/; the adapter is whatever Dawn
finds, falling back to Chromium's SwiftShader as the tests do (tests/jshost.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="10,1000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from jshost import JS, dawn_env, require_node_package

    node = require_node_package("webgpu")
    manifest = ROOT / "examples" / "web" / "kernels" / "classify.manifest.json"
    proc = subprocess.run(
        [node, "test/bench.mjs", str(manifest), args.batches, str(args.repeat)],
        cwd=JS,
        env=dawn_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    names = [k["entryPoint"] for k in result["rows"][0]["kernels"]]
    print(f"adapter: {result['adapter']} (Dawn in Node)")
    print(f"median of {args.repeat}; ms")
    print()
    header = ["B", "run()", *names]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in result["rows"]:
        cells = [str(row["B"]), f"{row['run_ms']:.3f}"]
        cells += [f"{k['ms']:.3f}" for k in row["kernels"]]
        print("| " + " | ".join(cells) + " |")
    print()
    print(f"allocations over all calls: {result['stats']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
