"""Launches each port in tests/kernels/ports_*.py plans, and the fewest a hand-written one needs.

    python benchmarks/port_launches.py [--check] [--function NAME]

The ports are Triton kernels of Liger-Kernel, unsloth, FlashAttention and xformers written in
Mimir's kernel language. For each one: the kernels in its PTX manifest and in its WGSL
manifest, and `minimum`, the launches the original (or a hand-written kernel doing the same
work) takes. A port above its minimum is a fusion cliff, marked `cliff`. `--check` compares
the counts with EXPECTED_LAUNCHES and exits 1 on any difference, so a scheduler change that
adds a launch, or removes one, shows here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORTS = sorted((ROOT / "tests" / "kernels").glob("ports_*.py"))

# port -> (PTX launches, WGSL launches, the minimum)
EXPECTED_LAUNCHES: dict[str, tuple[int, int, int]] = {
    "ports_flash.flash_fwd_matrix_bias": (1, 1, 1),
    "ports_flash.flash_fwd_vector_bias_causal_f16": (1, 1, 1),
    "ports_liger.liger_rms_norm": (1, 1, 1),
    # a bfloat16 result of a row launch goes through float32 scratch and a packing launch
    "ports_liger.liger_rms_norm_bf16": (2, 2, 1),
    "ports_liger.liger_fused_add_rms_norm": (1, 1, 1),
    "ports_liger.liger_layer_norm": (1, 1, 1),
    "ports_liger.liger_swiglu": (1, 1, 1),
    "ports_liger.liger_swiglu_bf16": (1, 1, 1),
    "ports_liger.liger_geglu": (1, 1, 1),
    "ports_liger.liger_rope": (1, 1, 1),
    "ports_liger.liger_cross_entropy": (1, 1, 1),
    # the original runs the product as a library matmul, then its own kernel: 2; one launch
    # would need an online log-sum-exp over tiles of the vocabulary, as attention's softmax
    "ports_liger.liger_fused_linear_cross_entropy": (2, 2, 1),
    "ports_liger.liger_kl_div": (1, 1, 1),
    "ports_liger.liger_jsd": (1, 1, 1),
    "ports_liger.liger_group_norm": (3, 3, 1),
    "ports_liger.liger_dyt": (1, 1, 1),
    "ports_liger.liger_softmax": (1, 1, 1),
    "ports_liger.liger_tvd": (1, 1, 1),
    "ports_unsloth.unsloth_rms_layernorm": (1, 1, 1),
    "ports_unsloth.unsloth_gemma_rms_layernorm": (1, 1, 1),
    "ports_unsloth.unsloth_rope_inplace": (1, 1, 1),
    "ports_unsloth.unsloth_swiglu": (1, 1, 1),
    "ports_unsloth.unsloth_geglu_exact": (1, 1, 1),
    "ports_unsloth.unsloth_geglu_approx": (1, 1, 1),
    "ports_unsloth.unsloth_cross_entropy_softcap": (1, 1, 1),
    "ports_unsloth.unsloth_cross_entropy_backward": (1, 1, 1),
    "ports_xformers.xformers_dropout_bias_gelu": (1, 1, 1),
    "ports_xformers.xformers_dropout_bias_squared_relu": (1, 1, 1),
    "ports_xformers.xformers_causal_log_softmax": (1, 1, 1),
}


def launches(path: Path, function: str) -> dict[str, int]:
    """The kernels in the function's PTX and WGSL manifests."""
    from mimir.codegen import compile_source

    result = compile_source(str(path), path.read_text(), ["ptx", "wgsl"], function=function)
    if not result.ok:
        codes = ", ".join(d.code for d in result.diagnostics)
        raise SystemExit(f"{path.stem}.{function} does not compile: {codes}")
    counts = {}
    for name, text in result.files.items():
        if name.endswith(".manifest.json"):
            backend = name.split("/")[0]
            counts[backend] = len(json.loads(text)["kernels"])  # type: ignore[arg-type]
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 unless EXPECTED_LAUNCHES")
    parser.add_argument("--function", default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    from support import import_file, kernels_of

    header = f"{'port':<50} {'ptx':>4} {'wgsl':>4} {'min':>4}"
    print(header)
    print("-" * len(header))
    wrong = []
    seen = set()
    for path in PORTS:
        for function in kernels_of(import_file(path)):
            name = f"{path.stem}.{function}"
            if args.function not in (None, function):
                continue
            seen.add(name)
            counts = launches(path, function)
            got = (counts["ptx"], counts["wgsl"])
            expected = EXPECTED_LAUNCHES.get(name)
            least = expected[2] if expected else 1
            note = "cliff" if got[0] > least else ""
            if expected is None or got != expected[:2]:
                want = (
                    "not in EXPECTED_LAUNCHES" if expected is None else f"expected {expected[:2]}"
                )
                note = f"{note} {want}".strip()
                wrong.append(name)
            print(f"{name:<50} {got[0]:>4} {got[1]:>4} {least:>4}  {note}", flush=True)
    if args.function is None:
        wrong += [f"{name} (no such port)" for name in EXPECTED_LAUNCHES if name not in seen]
    if args.check and wrong:
        print(f"launch counts differ from EXPECTED_LAUNCHES: {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
