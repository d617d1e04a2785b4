"""Philox4x32-10 random numbers (`rand`, `randn`): the known answers, Triton's conversion,
the shim's statistics, and every backend bit for bit against the shim.

The known-answer vectors are Random123's (`tests/kat_vectors`, the three `philox4x32 10`
lines: counter, key, expected output), the reference implementation of Salmon, Moraes,
Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3" (SC 2011).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest
from harness import run_backend, write_files

from mimir.array import Dim, Tensor, arange, float32, gpu, int32, rand, randn, tensor
from mimir.codegen import compile_source
from mimir.ops import numerics as nm

KERNELS = Path(__file__).resolve().parent / "kernels"
M32 = 0xFFFFFFFF

KAT = [  # counter (4 words), key (2 words), Philox4x32-10 of them
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((M32, M32, M32, M32), (M32, M32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


def bits(values: list[float]) -> list[int]:
    return [struct.unpack("<I", struct.pack("<f", v))[0] for v in values]


@pytest.mark.parametrize(("counter", "key", "expected"), KAT)
def test_philox4x32_10_gives_random123s_known_answers(counter, key, expected) -> None:
    assert nm.philox4x32(counter, key) == expected


def test_the_uniform_conversion_is_tritons() -> None:
    # the word as int32, `-x - 1` where negative, to float32, times 4.6566127342e-10 (f32)
    assert nm.uniform_float(0) == 0.0
    assert nm.uniform_float(M32) == 0.0  # int32 -1 -> 0
    top = nm.uniform_float(0x7FFFFFFF)
    assert top == nm.uniform_float(0x80000000) and top < 1.0
    assert top == 1.0 - 2.0**-24  # the largest float32 below 1
    # rand is word 0 of the counter (offset, 0, 0, 0) under the key (seed, 0)
    assert nm.rand(0, 0) == nm.uniform_float(0x6627E8D5)
    # a negative seed is sign-extended to 64 bits, as Triton's `seed.to(uint64)`
    assert nm.rand(-1, 5) == nm.uniform_float(nm.philox4x32((5, 0, 0, 0), (M32, M32))[0])


N = Dim("N")


@gpu
def _both(offsets: Tensor[int32, N], seed: int) -> tuple[Tensor[float32, N], Tensor[float32, N]]:
    return rand(seed, offsets), randn(seed, offsets)


def test_the_shim_applies_the_element_functions_and_keeps_host_rand() -> None:
    offsets = tensor(list(range(-3, 5)), int32).to("gpu")
    u, z = _both(offsets, 99)
    assert u.tolist() == [nm.rand(99, i) for i in range(-3, 5)]
    assert z.tolist() == [nm.randn(99, i) for i in range(-3, 5)]
    host = rand((2, 3), seed=4)  # the host function of the same name is unchanged
    assert host.shape == (2, 3) and all(-1.0 <= v < 1.0 for row in host.tolist() for v in row)


@gpu
def _stream(seed: int) -> tuple[Tensor[float32, 20000], Tensor[float32, 20000]]:
    return rand(seed, arange(20000)), randn(seed, arange(20000))


def test_mean_and_variance_are_those_of_the_distributions() -> None:
    u, z = (t.tolist() for t in _stream(1234))
    n = len(u)
    mean_u = sum(u) / n
    var_u = sum((v - mean_u) ** 2 for v in u) / n
    assert abs(mean_u - 0.5) < 4 * math.sqrt(1 / 12 / n)
    assert abs(var_u - 1 / 12) < 0.003
    assert all(0.0 <= v < 1.0 for v in u)
    counts = [0] * 10
    for v in u:
        counts[int(v * 10)] += 1
    chi2 = sum((c - n / 10) ** 2 / (n / 10) for c in counts)
    assert chi2 < 27.9  # 9 degrees of freedom, p = 0.001
    mean_z = sum(z) / n
    var_z = sum((v - mean_z) ** 2 for v in z) / n
    assert abs(mean_z) < 4 / math.sqrt(n)
    assert abs(var_z - 1.0) < 0.04


BACKENDS = ("wgsl", "spirv", "msl", "ptx")
# offsets at the counter's edges, and seeds at the key's
OFFSETS = [0, 1, 2, 3, 1000, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1] + list(range(7, 120, 7))


def _run(function: str, backend: str, inputs: dict, scalars: dict, tmp: Path) -> dict:
    path = KERNELS / "random.py"
    result = compile_source(str(path), path.read_text(), [backend], function=function)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    write_files(result.files, tmp)
    manifest = json.loads(result.files[f"{function}.manifest.json"])
    return run_backend(backend, manifest, tmp, inputs, {"N": len(OFFSETS)}, scalars)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rand_is_bit_identical_to_the_shim_on_every_backend(backend: str, tmp_path: Path) -> None:
    got = _run("uniform_of", backend, {"offsets": OFFSETS}, {}, tmp_path / "u")
    assert bits(got["out"] if "out" in got else next(iter(got.values()))) == bits(
        [nm.rand(12345, o) for o in OFFSETS]
    )
    signed = [o - 2**32 if o >= 2**31 else o for o in OFFSETS]
    for seed in (-5, 2**31 - 1, 0):
        got = _run("uniform_signed", backend, {"offsets": signed}, {"seed": seed}, tmp_path / "s")
        values = next(iter(got.values()))
        assert bits(values) == bits([nm.rand(seed, o) for o in signed]), seed


@pytest.mark.parametrize("backend", BACKENDS)
def test_randn_agrees_with_the_shim_within_float32_tolerance(backend: str, tmp_path: Path) -> None:
    offsets = [o - 2**32 if o >= 2**31 else o for o in OFFSETS]
    got = _run("uniform_and_normal", backend, {"offsets": offsets}, {"seed": 3}, tmp_path)
    values = next(iter(got.values()))
    expected = [nm.rand(3, o) + nm.randn(-7, o) for o in offsets]
    for g, e in zip(values, expected, strict=True):
        assert abs(g - e) <= 1e-5 + 1e-4 * abs(e), (g, e)


@pytest.mark.parametrize("backend", ["wgsl", "spirv"])
def test_randn_reduces_its_angle_without_payne_hanek(backend: str) -> None:
    """Box-Muller's angle is in [0, 2 pi]: its cosine reduces by a few exact products, not by
    `mimir_trig`'s Payne-Hanek integer reduction, which made a driver spend half a minute
    compiling one `randn` kernel (lavapipe: 34 s, 0.08 s without it)."""
    path = KERNELS / "random.py"
    result = compile_source(str(path), path.read_text(), [backend], function="gaussian_noise")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    module = result.files[f"gaussian_noise_0_ew.{'wgsl' if backend == 'wgsl' else 'spv'}"]
    text = module.encode() if isinstance(module, str) else module  # a SPIR-V binary keeps OpName
    assert b"mimir_trig" not in text
    assert b"mimir_randn" in text
