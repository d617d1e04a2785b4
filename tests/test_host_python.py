"""`mimir.runtime.load`: compiled kernels called on NumPy arrays and torch tensors.

The kernels are the committed snapshots (`tests/kernels/out/<backend>/<file>/`),
exactly the files a user would vendor. Each call's outputs are compared with
the shim's on the same inputs; the arguments' validation is checked by code.
WGSL and SPIR-V run through wgpu (lavapipe here); PTX runs through the CUDA
driver only where a CUDA device is present.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from harness import assert_close, require_tool, tf32_fallback_atol

from mimir.runtime import load
from mimir.runtime.host import HostError
from mimir.runtime.verify import shim_reference

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "kernels" / "out"


def _shim(stem: str, function: str, inputs: dict, dims: dict, scalars: dict | None = None):
    flat = {k: np.asarray(v).ravel().tolist() for k, v in inputs.items()}
    return shim_reference(ROOT / "kernels" / f"{stem}.py", function, flat, dims, scalars)


@pytest.fixture(autouse=True)
def _wgpu_unless_cuda(request: pytest.FixtureRequest) -> None:
    # Everything here runs on wgpu but the CUDA tests and the shim's own.
    if "cuda" not in request.node.name and "shim" not in request.node.name:
        require_tool("wgpu")


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("backend", ["wgsl", "spirv"])
def test_numpy_in_numpy_out_matches_the_shim(backend: str) -> None:
    kernels = load(OUT / backend / "layernorm")
    assert kernels.backend == backend
    for n in (1, 5, 37):
        x, w = _rand(n, 48, seed=n), _rand(48, seed=1)
        y = kernels.rmsnorm(x, w)
        assert isinstance(y, np.ndarray) and y.shape == (n, 48) and y.dtype == np.float32
        assert_close(y.ravel().tolist(), _shim("layernorm", "rmsnorm", {"x": x, "weight": w},
                                               {"N": n})["out"], "float32")  # fmt: skip


def test_torch_in_torch_out_and_scalars_by_position_or_name() -> None:
    kernels = load(OUT / "wgsl" / "linear")
    x, w, b = _rand(9, 17, seed=2), _rand(17, 5, seed=3), _rand(5, seed=4)
    want = _shim("linear", "linear_gelu_scaled", {"x": x, "w": w, "b": b}, {"N": 9},
                 {"scale": 0.25})["out"]  # fmt: skip
    got = kernels.linear_gelu_scaled(torch.from_numpy(x), torch.from_numpy(w),
                                      torch.from_numpy(b), 0.25)  # fmt: skip
    assert isinstance(got, torch.Tensor) and tuple(got.shape) == (9, 5)
    assert got.dtype == torch.float32
    assert_close(got.flatten().tolist(), want, "float32")
    by_name = kernels.linear_gelu_scaled(x, w, b=b, scale=np.float32(0.25))
    assert_close(by_name.ravel().tolist(), want, "float32")


def test_multi_launch_kernel_with_scratch_and_several_outputs() -> None:
    kernels = load(OUT / "wgsl" / "reductions")
    x = np.random.default_rng(5).integers(-8, 8, (6, 11)).astype(np.int32)
    m = np.random.default_rng(6).random((6, 11)) < 0.5
    total, anything = kernels.int_sum_and_bool_any(x, m)[:2]
    want = _shim("reductions", "int_sum_and_bool_any", {"x": x, "m": m}, {"A": 6, "B": 11})
    assert total.ravel().tolist() == want["out0"]
    assert anything.dtype == np.bool_ and anything.ravel().tolist() == want["out1"]


def _adam_state(n: int, seed: int) -> dict[str, np.ndarray]:
    p, grad, m, v = (_rand(n, seed=seed + k) for k in range(4))
    return {"p": p, "grad": grad, "m": m, "v": np.abs(v)}


@pytest.mark.parametrize("backend", ["wgsl", "spirv"])
def test_inout_numpy_arrays_are_updated_in_place_and_returned(backend: str) -> None:
    kernels = load(OUT / backend / "inout")
    assert [b["name"] for b in kernels.adam_step.inputs] == ["p", "grad", "m", "v"]
    state = _adam_state(37, seed=20)
    want = {k: v.copy() for k, v in state.items()}
    for step in (1, 2, 3):  # each step starts from the state the last one left
        expected = _shim("inout", "adam_step", want, {"N": 37}, {"lr": 0.01, "step": step})
        for name in ("p", "m", "v"):
            want[name] = np.array(expected[name], np.float32)
        grad = state["grad"].copy()
        got = kernels.adam_step(state["p"], state["grad"], state["m"], state["v"], 0.01, step)
        assert isinstance(got, tuple) and len(got) == 3  # no outputs: the InOut arguments
        assert all(a is state[k] for a, k in zip(got, ("p", "m", "v"), strict=True))
        for name in ("p", "m", "v"):
            assert_close(state[name].tolist(), want[name].tolist(), "float32", label=name)
        assert state["grad"].tolist() == grad.tolist()  # a plain input is left alone


def test_inout_torch_tensors_are_updated_in_place() -> None:
    kernels = load(OUT / "wgsl" / "inout")
    state = _adam_state(300, seed=30)
    want = _shim("inout", "adam_step", state, {"N": 300}, {"lr": 0.05, "step": 1})
    p = torch.from_numpy(state["p"].copy()).requires_grad_()  # a parameter, as an optimizer has
    m, v = torch.from_numpy(state["m"].copy()), torch.from_numpy(state["v"].copy())
    got = kernels.adam_step(p=p, grad=torch.from_numpy(state["grad"]), m=m, v=v, lr=0.05, step=1)
    assert got[0] is p and got[1] is m and got[2] is v
    assert p.requires_grad and p.grad_fn is None  # updated without autograd history
    for name, tensor in (("p", p), ("m", m), ("v", v)):
        assert_close(tensor.detach().flatten().tolist(), want[name], "float32", label=name)
    # An InOut parameter next to an output: the call returns the output, `x` is updated.
    x, s = _rand(4, 6, seed=31), _rand(6, seed=32)
    want = _shim("inout", "scale_and_norm", {"x": x, "s": s}, {"N": 4, "D": 6})
    xt = torch.from_numpy(x.copy()).t().contiguous().t()  # not contiguous: copied back
    assert not xt.is_contiguous()
    out = kernels.scale_and_norm(xt, torch.from_numpy(s))
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (4,)
    assert_close(out.tolist(), want["out"], "float32")
    assert_close(xt.flatten().tolist(), want["x"], "float32", label="x")


def test_inout_needs_a_writable_array() -> None:
    kernels = load(OUT / "wgsl" / "inout")
    state = _adam_state(8, seed=40)
    before = state["p"].copy()
    state["p"].flags.writeable = False
    with pytest.raises(HostError) as info:
        kernels.adam_step(state["p"], state["grad"], state["m"], state["v"], 0.01, 1)
    assert info.value.code == "GPU040" and "`p` is `InOut`" in str(info.value)
    assert state["p"].tolist() == before.tolist()
    frozen = memoryview(bytes(12)).cast("f")  # float32, but read-only
    with pytest.raises(HostError, match="read-only"):
        kernels.swap(frozen, np.zeros(3, np.float32))


def test_inout_buffer_objects_are_written_back() -> None:
    import array

    kernels = load(OUT / "wgsl" / "inout")
    p, q = array.array("f", [1.0, 2.0, 3.0]), array.array("f", [4.0, 5.0, 6.0])
    assert kernels.swap(p, q) == (p, q)
    assert p.tolist() == [4.0, 5.0, 6.0] and q.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("function", "args", "words"),
    [
        ("embedding", lambda: (_rand(5, 3), np.array([0, 4, 5, 2], np.int32)),
         "`ids` holds 5 at index [2], outside its Range(0, V) (0 <= value < 5"),
        ("embedding", lambda: (_rand(5, 3), torch.tensor([0, -1, 9], dtype=torch.int32)),
         "`ids` holds -1 at index [1]"),
        ("cross_entropy_mean", lambda: (_rand(3, 4), np.array([[0], [3], [4]], np.int32)),
         "`labels` holds 4 at index [2, 0], outside its Range(0, C)"),
    ],
)  # fmt: skip
def test_a_value_outside_its_range_is_refused_before_the_launch(function, args, words) -> None:
    kernels = load(OUT / "wgsl" / "gathers")
    with pytest.raises(HostError) as info:
        kernels[function](*args())
    assert info.value.code == "GPU043"
    assert words in str(info.value), str(info.value)
    assert kernels[function]._runner is None  # refused before anything reached the device
    # The same values, in range, run.
    ids = np.array([0, 4, 2], np.int32)
    table = _rand(5, 3)
    assert kernels.embedding(table, ids).tolist() == table[ids].tolist()


@pytest.mark.parametrize("backend", ["wgsl", "spirv"])
def test_tuple_and_named_results_come_back_in_order(backend: str) -> None:
    kernels = load(OUT / backend / "inout")
    x = _rand(6, 10, seed=50)
    mean, rstd = kernels.layer_norm_stats(x)
    want = _shim("inout", "layer_norm_stats", {"x": x}, {"N": 6, "D": 10})
    assert mean.shape == rstd.shape == (6,)
    assert_close(mean.tolist(), want["out0"], "float32", label="mean")
    assert_close(rstd.tolist(), want["out1"], "float32", label="rstd")
    got = kernels.row_stats_named(torch.from_numpy(x))
    want = _shim("inout", "row_stats_named", {"x": x}, {"N": 6, "D": 10})
    assert [b["name"] for b in kernels.row_stats_named.outputs] == ["mean", "spread", "top"]
    for name, tensor in zip(("mean", "spread", "top"), got, strict=True):
        assert isinstance(tensor, torch.Tensor)
        assert_close(tensor.tolist(), want[name], "float32", label=name)


@pytest.mark.parametrize("backend", ["wgsl", "spirv"])
def test_float16_arrays_in_and_out(backend: str) -> None:
    kernels = load(OUT / backend / "combos")
    x = _rand(5, 24, seed=7).astype(np.float16)
    w = _rand(24, 9, seed=8).astype(np.float16)
    y = kernels.half_pipeline(x, w)
    assert y.dtype == np.float16 and y.shape == (5, 9)
    want = _shim("combos", "half_pipeline", {"x": x, "w": w}, {"N": 5, "M": 9})["out"]
    assert_close(y.astype(np.float32).ravel().tolist(), want, "float16")
    yt = kernels.half_pipeline(torch.from_numpy(x), torch.from_numpy(w))
    assert yt.dtype == torch.float16
    assert yt.float().numpy().tolist() == y.astype(np.float32).tolist()


@pytest.mark.parametrize("backend", ["wgsl", "spirv"])
def test_bfloat16_arrays_in_and_out(backend: str) -> None:
    """NumPy has no bfloat16: bit patterns travel as uint16 both ways, and torch.bfloat16
    tensors as themselves; an odd count (5 x 7) comes back without the word's padding, and
    an `InOut` bfloat16 array is updated in place. A float32 array where bfloat16 is
    expected is GPU041 with the way to pass it."""
    kernels = load(OUT / backend / "half_storage")
    x = _bf16_bits(_rand(5, 7, seed=9).tolist())
    g = _bf16_bits(_rand(7, seed=10).tolist())
    y = kernels.bf16_rms_norm(x, g)
    assert y.dtype == np.uint16 and y.shape == (5, 7)
    inputs = {"x": _values(x, "bfloat16"), "g": _values(g, "bfloat16")}
    want = _shim("half_storage", "bf16_rms_norm", inputs, {"N": 5, "D": 7})["out"]
    assert_close(_values(y, "bfloat16"), want, "bfloat16")
    yt = kernels.bf16_rms_norm(
        torch.from_numpy(x.astype(np.int32) << 16).view(torch.float32).to(torch.bfloat16),
        torch.from_numpy(g.astype(np.int32) << 16).view(torch.float32).to(torch.bfloat16),
    )
    assert yt.dtype == torch.bfloat16
    assert yt.view(torch.int16).numpy().view(np.uint16).tolist() == y.tolist()
    p, grad = x.copy(), _rand(5, 7, seed=11)
    kernels.bf16_update(p, grad, 0.5)
    want = _shim(
        "half_storage",
        "bf16_update",
        {"p": _values(x, "bfloat16"), "grad": grad.ravel().tolist()},
        {"N": 5, "D": 7},
        {"lr": 0.5},
    )["p"]
    assert_close(_values(p, "bfloat16"), want, "bfloat16")
    with pytest.raises(HostError) as info:
        kernels.bf16_rms_norm(_rand(5, 7), g)
    assert info.value.code == "GPU041" and "uint16" in str(info.value)


def test_device_state_is_kept_between_calls() -> None:
    kernels = load(OUT / "wgsl" / "layernorm")
    w = _rand(48)
    kernels.rmsnorm(_rand(4, 48), w)
    runner = kernels.rmsnorm._runner
    buffers = dict(runner.buffers)
    y = kernels.rmsnorm(_rand(4, 48, seed=9), w)
    assert kernels.rmsnorm._runner is runner
    assert all(runner.buffers[k] is v for k, v in buffers.items())  # same dims: same buffers
    want = _shim("layernorm", "rmsnorm", {"x": _rand(4, 48, seed=9), "weight": w}, {"N": 4})
    assert_close(y.ravel().tolist(), want["out"], "float32")
    assert kernels.rmsnorm(_rand(3, 48), w).shape == (3, 48)  # new dims: reallocated


@pytest.mark.parametrize(
    ("call", "code", "words"),
    [
        (lambda k: k.rmsnorm(_rand(3, 48).astype(np.float64), _rand(48)), "GPU041", "float64"),
        (lambda k: k.rmsnorm(_rand(3, 47), _rand(48)), "GPU040", "axis 1"),
        (lambda k: k.rmsnorm(_rand(3, 48, 1), _rand(48)), "GPU040", "shape [3, 48, 1]"),
        (lambda k: k.rmsnorm(_rand(3, 48), [1.0] * 48), "GPU040", "got list"),
        (lambda k: k.rmsnorm(_rand(3, 48)), "GPU040", "missing argument `weight`"),
        (lambda k: k.rmsnorm(_rand(3, 48), _rand(48), _rand(48)), "GPU040", "takes 2"),
        (lambda k: k.rmsnorm(_rand(0, 48), _rand(48)), "GPU042", "below its minimum 1"),
        (lambda k: k.rmsnorm(_rand(3, 48), _rand(48), dims={"M": 2}), "GPU040", "no dim `M`"),
    ],
)
def test_arguments_are_checked_against_the_manifest(call, code: str, words: str) -> None:
    kernels = load(OUT / "wgsl" / "layernorm")
    with pytest.raises(HostError) as info:
        call(kernels)
    assert info.value.code == code
    assert words in str(info.value)


def test_a_folder_with_every_backend_loads_the_one_asked_for(tmp_path: Path) -> None:
    for backend in ("wgsl", "spirv", "ptx"):
        (tmp_path / backend).mkdir()
        for f in (OUT / backend / "layernorm").iterdir():
            (tmp_path / backend / f.name).write_bytes(f.read_bytes())
    assert load(tmp_path, backend="spirv").backend == "spirv"
    assert load(tmp_path).backend in ("wgsl", "ptx")  # ptx where a CUDA device is present
    with pytest.raises(AttributeError, match="no compiled function `nope`"):
        _ = load(tmp_path, backend="wgsl").nope


def test_a_library_lists_its_kernels_and_names_them_on_a_typo() -> None:
    kernels = load(OUT / "wgsl" / "linear")
    assert {"linear_relu", "linear_gelu_scaled"} <= set(dir(kernels))
    assert "linear_relu" in kernels and "nope" not in kernels
    shown = repr(kernels)
    assert "linear_relu(x, w, b)" in shown and "linear_gelu_scaled(x, w, b, scale)" in shown
    with pytest.raises(AttributeError) as info:
        _ = kernels.linear_rleu
    message = str(info.value)
    assert "`linear_relu`" in message and "`linear_gelu_scaled`" in message
    assert "did you mean `linear_relu`?" in message
    with pytest.raises(KeyError, match="it holds"):
        _ = kernels["linear"]


def _cuda_or_skip() -> None:
    from mimir.runtime import cuda_runner

    try:
        cuda_runner.device_description()
    except cuda_runner.CudaUnavailableError as err:
        pytest.skip(f"no CUDA device: {err}")


def test_ptx_through_cuda_on_host_arrays() -> None:
    _cuda_or_skip()
    kernels = load(OUT / "ptx" / "layernorm", backend="ptx")
    x, w = _rand(37, 48), _rand(48, seed=1)
    want = _shim("layernorm", "rmsnorm", {"x": x, "weight": w}, {"N": 37})["out"]
    assert_close(kernels.rmsnorm(x, w).ravel().tolist(), want, "float32")
    assert_close(kernels.rmsnorm(x, w).ravel().tolist(), want, "float32")  # reused buffers


def test_ptx_through_cuda_on_cuda_tensors_without_copies() -> None:
    _cuda_or_skip()
    if not torch.cuda.is_available():
        pytest.skip("this torch build has no CUDA")
    kernels = load(OUT / "ptx" / "layernorm", backend="ptx")
    x, w = _rand(37, 48), _rand(48, seed=1)
    got = kernels.rmsnorm(torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda())
    assert got.is_cuda and tuple(got.shape) == (37, 48)
    want = _shim("layernorm", "rmsnorm", {"x": x, "weight": w}, {"N": 37})["out"]
    assert_close(got.cpu().flatten().tolist(), want, "float32")


def test_the_shim_reads_and_writes_numpy_arrays() -> None:
    from support import import_file

    from mimir.array import MimirError, bool_, float32, int32, tensor

    t = tensor(np.ones((2, 3)))
    assert t.shape == (2, 3) and t.dtype == float32
    assert tensor(np.arange(4, dtype=np.int64)).dtype == int32
    assert tensor(np.array([True, False])).dtype == bool_
    assert tensor(torch.arange(6, dtype=torch.float32).reshape(2, 3)).tolist()[1] == [3, 4, 5]
    assert tensor(np.arange(12.0).reshape(3, 4)[:, 1]).tolist() == [1.0, 5.0, 9.0]  # strided
    back = np.asarray(tensor([[1.5, 2.0]]))
    assert back.dtype == np.float32 and back.tolist() == [[1.5, 2.0]]
    assert np.asarray(tensor([True, False], dtype=bool_)).tolist() == [True, False]

    module = import_file(ROOT / "kernels" / "layernorm.py")
    x, w = _rand(3, 48), _rand(48)
    out = module.rmsnorm(x, w)  # ndarrays straight into a kernel call
    want = _shim("layernorm", "rmsnorm", {"x": x, "weight": w}, {"N": 3})["out"]
    assert np.asarray(out).ravel().tolist() == want
    with pytest.raises(MimirError) as info:
        module.rmsnorm(x.astype(np.float64), w)
    assert info.value.code == "GPU041"


def test_the_shim_stays_stdlib_only() -> None:
    code = "import sys, mimir.array, mimir.runtime.host; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    # With NumPy unimportable, buffer objects still go in (array.array here).
    code = (
        "import sys; sys.modules['numpy'] = None\n"
        "import array\n"
        "from mimir.array import tensor\n"
        "t = tensor(array.array('f', [1.5, 2.0, 3.0]))\n"
        "print(t.dtype, t.tolist())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "float32 [1.5, 2.0, 3.0]"


def test_run_manifest_takes_arrays_as_well_as_lists() -> None:
    import json

    from mimir.runtime import run_manifest

    folder = OUT / "wgsl" / "layernorm"
    manifest = json.loads((folder / "rmsnorm.manifest.json").read_text())
    x, w = _rand(64, 48), _rand(48, seed=1)
    got = run_manifest(manifest, folder, {"x": x, "weight": torch.from_numpy(w)}, {"N": 64})
    want = _shim("layernorm", "rmsnorm", {"x": x, "weight": w}, {"N": 64})["out"]
    assert_close(got["out"], want, "float32")
    with pytest.raises(ValueError, match="input `x` has 144 values"):
        run_manifest(manifest, folder, {"x": x[:3], "weight": w}, {"N": 64})


class _FakeDriver:
    """The CUDA driver calls `load` makes, over the PTX interpreter of tests/harness: device
    memory is byte arrays at fake addresses, a launch reads its parameters from the pointer
    array exactly as the driver does and runs the kernel on the CPU."""

    def __init__(self) -> None:
        from harness.ptx_interp import _Memory

        self.memory = _Memory([])
        self.functions: dict[int, tuple[dict, str, int]] = {}
        self.launches: list[tuple[str, tuple, tuple]] = []

    def _region(self, address: int, size: int) -> tuple[bytearray, int]:
        return self.memory.find(address, size)

    def cuMemAlloc_v2(self, pointer, size):  # noqa: N802 - the driver's names
        address = (len(self.memory.regions) + 1) << 40
        self.memory.regions.append((address, bytearray(size), f"alloc{address >> 40}"))
        pointer._obj.value = address
        return 0

    def cuMemcpyHtoD_v2(self, dst, src, size):  # noqa: N802
        data, offset = self._region(dst, size)
        data[offset : offset + size] = src[:size]
        return 0

    def cuMemsetD8Async(self, dst, value, size, stream):  # noqa: N802
        data, offset = self._region(dst, size)
        data[offset : offset + size] = bytes([value]) * size
        return 0

    def cuMemcpyDtoH_v2(self, dst, src, size):  # noqa: N802
        import ctypes

        data, offset = self._region(src, size)
        ctypes.memmove(dst.value, bytes(data[offset : offset + size]), size)
        return 0

    def cuModuleGetFunction(self, function, module, name):  # noqa: N802
        funcs, text = module
        handle = len(self.functions) + 1
        size = re.search(r"mimir_uniforms\[(\d+)\]", text)
        self.functions[handle] = (funcs, name.decode(), int(size.group(1)) if size else 0)
        function._obj.value = handle
        return 0

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):  # noqa: N802
        import ctypes

        from harness.ptx_interp import _Interp

        funcs, entry, uniform_size = self.functions[function.value]
        fn = funcs[entry]
        assert (bx, by, bz) == fn.block and shared == 0 and extra is None
        values = {}
        for i, name in enumerate(fn.param_names):
            size = uniform_size if name == "mimir_uniforms" else 8
            values[name] = ctypes.string_at(params[i], size)
        self.launches.append((entry, (gx, gy, gz), (bx, by, bz)))
        _Interp(funcs, self.memory, values).launch(entry, (gx, gy, gz))
        return 0

    def cuCtxSynchronize(self):  # noqa: N802
        return 0

    def cuStreamSynchronize(self, stream):  # noqa: N802
        return 0

    def cuMemFree_v2(self, pointer):  # noqa: N802
        return 0

    def cuModuleUnload(self, module):  # noqa: N802
        return 0


def test_the_cuda_engine_marshals_launches_as_the_driver_reads_them(monkeypatch) -> None:
    """`load` on PTX without a GPU: the driver replaced by the PTX interpreter, so buffers,
    parameter arrays, the uniform bytes, grid and block sizes and the launch order are
    exercised here; the real driver runs the same code where a GPU is lent."""
    from harness.ptx_interp import _parse

    from mimir.runtime import cuda_runner

    fake = _FakeDriver()
    monkeypatch.setattr(cuda_runner, "_lib", lambda: fake)
    monkeypatch.setattr(cuda_runner, "_context", lambda: None)
    monkeypatch.setattr(cuda_runner, "load_module", lambda text, label="": (_parse(text), text))
    kernels = load(OUT / "ptx" / "layernorm", backend="ptx")
    x, g, b = _rand(3, 5, seed=11), _rand(5, seed=12), _rand(5, seed=13)
    got = kernels.layernorm(x, g, b)  # three launches, two scratch buffers
    want = _shim("layernorm", "layernorm", {"x": x, "gamma": g, "beta": b}, {"N": 3, "D": 5})
    assert got.shape == (3, 5)
    assert_close(got.ravel().tolist(), want["out"], "float32")
    assert [entry for entry, _, _ in fake.launches] == [
        k["entry_point"] for k in kernels.layernorm.manifest["kernels"]
    ]
    lin = load(OUT / "ptx" / "linear", backend="ptx")
    x, w, bias = _rand(2, 17, seed=14), _rand(17, 5, seed=15), _rand(5, seed=16)
    got = lin.linear_gelu_scaled(
        torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(bias), 0.5
    )
    want = _shim("linear", "linear_gelu_scaled", {"x": x, "w": w, "b": bias}, {"N": 2},
                 {"scale": 0.5})["out"]  # fmt: skip
    assert isinstance(got, torch.Tensor)
    assert_close(got.flatten().tolist(), want, "float32")  # an f32 scalar in the uniform


def test_a_one_launch_sum_runs_again_on_the_same_buffers(monkeypatch) -> None:
    """PTX's `x.sum()` over several workgroups is one launch whose last workgroup resets
    its counter: through `load` (the driver replaced as above) a second call on the same
    buffers is right even with the host's clearing switched off, so only the kernel can
    have put the counter back to zero."""
    from harness.ptx_interp import _parse

    from mimir.codegen.schedule.layout import CHUNK
    from mimir.runtime import cuda_runner

    fake = _FakeDriver()
    monkeypatch.setattr(cuda_runner, "_lib", lambda: fake)
    monkeypatch.setattr(cuda_runner, "_context", lambda: None)
    monkeypatch.setattr(cuda_runner, "load_module", lambda text, label="": (_parse(text), text))
    kernels = load(OUT / "ptx" / "big_reduction", backend="ptx")
    assert len(kernels.total.manifest["kernels"]) == 1
    xs = [_rand(3 * CHUNK + 77, seed=k) for k in (70, 71)]
    first = kernels.total(xs[0])
    monkeypatch.setattr(fake, "cuMemsetD8Async", lambda *args: 0)  # nothing cleared now
    second = kernels.total(xs[1])
    assert len(fake.launches) == 2
    for x, got in zip(xs, (first, second), strict=True):
        want = _shim("big_reduction", "total", {"x": x}, {"N": x.size})["out"]
        assert_close(got.ravel().tolist(), want, "float32")


def test_the_cuda_engine_updates_inout_arrays_and_checks_ranges(monkeypatch) -> None:
    """InOut buffers through the CUDA engine (the driver replaced as above): uploaded, not
    cleared, read back and written into the caller's arrays; a Range violation is refused
    before any launch."""
    from harness.ptx_interp import _parse

    from mimir.runtime import cuda_runner

    fake = _FakeDriver()
    monkeypatch.setattr(cuda_runner, "_lib", lambda: fake)
    monkeypatch.setattr(cuda_runner, "_context", lambda: None)
    monkeypatch.setattr(cuda_runner, "load_module", lambda text, label="": (_parse(text), text))
    kernels = load(OUT / "ptx" / "inout", backend="ptx")
    state = _adam_state(5, seed=60)
    want = _shim("inout", "adam_step", state, {"N": 5}, {"lr": 0.1, "step": 2})
    p, m, v = state["p"].copy(), state["m"].copy(), state["v"].copy()
    assert kernels.adam_step(p, state["grad"], m, v, 0.1, 2) == (p, m, v)
    for name, array in (("p", p), ("m", m), ("v", v)):
        assert_close(array.tolist(), want[name], "float32", label=name)
    x, s = _rand(2, 3, seed=61), _rand(3, seed=62)
    want = _shim("inout", "scale_and_norm", {"x": x, "s": s}, {"N": 2, "D": 3})
    xt = torch.from_numpy(x.copy())
    out = kernels.scale_and_norm(xt, torch.from_numpy(s))
    assert_close(out.tolist(), want["out"], "float32")
    assert_close(xt.flatten().tolist(), want["x"], "float32", label="x")
    gathers = load(OUT / "ptx" / "gathers", backend="ptx")
    launches = len(fake.launches)
    with pytest.raises(HostError) as info:
        gathers.embedding(_rand(4, 2), np.array([3, 4], np.int32))
    assert info.value.code == "GPU043" and "holds 4 at index [1]" in str(info.value)
    assert len(fake.launches) == launches


ZOO = sorted(
    (p.parent.name, p.name.removesuffix(".manifest.json"))
    for p in (OUT / "wgsl").glob("*/*.manifest.json")
)
_NUMPY = {"float32": np.float32, "float16": np.float16, "int32": np.int32,
          "uint32": np.uint32, "bool_": np.bool_}  # fmt: skip


def _bf16_bits(values: list) -> np.ndarray:
    """bfloat16 values (already exact bfloat16) as NumPy uint16 bit patterns."""
    return (np.array(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _values(array: np.ndarray, dtype: str) -> list:
    """A result as Python floats: bfloat16 comes back as uint16 bit patterns."""
    if dtype == "bfloat16":
        assert array.dtype == np.uint16
        array = (array.astype(np.uint32) << 16).view(np.float32)
    return array.ravel().tolist()


@pytest.mark.parametrize(("stem", "function"), ZOO, ids=[f"{s}.{f}" for s, f in ZOO])
def test_load_runs_every_zoo_kernel_on_numpy_arrays(stem: str, function: str) -> None:
    """Every committed WGSL snapshot of tests/kernels, called with NumPy arrays."""
    from mimir.runtime import manifest as mf
    from mimir.runtime.verify import choose_dims, default_scalars, random_inputs

    kernel = load(OUT / "wgsl" / stem)[function]
    dims = choose_dims(kernel.manifest, (7, 13, 5, 11, 3))
    inputs = random_inputs(kernel.manifest, dims, seed=5)
    scalars = default_scalars(kernel.manifest, dims)
    arrays = {  # NumPy has no bfloat16: those go in as uint16 bit patterns
        b["name"]: (
            _bf16_bits(inputs[b["name"]])
            if b["dtype"] == "bfloat16"
            else np.array(inputs[b["name"]], _NUMPY[b["dtype"]])
        ).reshape(mf.buffer_shape(b, dims))
        for b in kernel.inputs
    }
    free = {
        d: v for d, v in dims.items() if not any(d in map(str, b["shape"]) for b in kernel.inputs)
    }
    got = kernel(**arrays, **scalars, dims=free)
    got = got if isinstance(got, tuple) else (got,)
    want = shim_reference(ROOT / "kernels" / f"{stem}.py", function, inputs, dims, scalars)
    results = kernel.outputs or kernel.inouts  # no outputs: the updated InOut arguments
    assert len(got) == len(results)
    atol = tf32_fallback_atol(kernel.manifest, dims)
    for buf, array in zip(results, got, strict=True):
        assert tuple(array.shape) == mf.buffer_shape(buf, dims)
        values = _values(np.asarray(array), buf["dtype"])
        assert_close(values, want[buf["name"]], buf["dtype"], atol=atol, label=buf["name"])
    for buf in kernel.inouts:  # updated in place
        got_inout = _values(arrays[buf["name"]], buf["dtype"])
        assert_close(got_inout, want[buf["name"]], buf["dtype"], atol=atol, label=buf["name"])


@pytest.mark.parametrize("backend", ["wgsl", "spirv"])
def test_a_dim_only_an_equation_fixes_is_solved_from_the_shapes(backend: str) -> None:
    """`x: Tensor[float32, 3 * C]` alone: the manifest's `solve` says C is x's size / 3; `T + 1`
    alone: T is the size less 1. A size the scale does not divide fits no C (GPU040)."""
    kernels = load(OUT / backend / "sizes")
    for c in (1, 5):
        x = _rand(3 * c, seed=c)
        y = kernels.thirds_summed(x)
        assert y.shape == (c,)
        assert_close(y.tolist(), _shim("sizes", "thirds_summed", {"x": x}, {"C": c})["out"],
                     "float32")  # fmt: skip
    x = _rand(2, 8)
    assert kernels.shifted_rows(x).shape == (2, 7)
    want = _shim("sizes", "shifted_rows", {"x": x}, {"B": 2, "T": 7})["out"]
    assert_close(kernels.shifted_rows(x).ravel().tolist(), want, "float32")
    with pytest.raises(HostError) as info:
        kernels.thirds_summed(_rand(7))
    assert info.value.code == "GPU040" and "(7 is not a multiple of 3)" in str(info.value)
    with pytest.raises(HostError) as info:
        kernels.shifted_rows(_rand(2, 1))  # T = 0, below its minimum
    assert info.value.code == "GPU042"
    assert kernels.thirds_summed(_rand(9), dims={"C": 3}).shape == (3,)  # given, not solved
    with pytest.raises(HostError) as info:
        kernels.thirds_summed(_rand(9), dims={"C": 2})  # given, and the shape disagrees
    assert info.value.code == "GPU040"


@pytest.mark.parametrize("backend", ["wgsl", "spirv"])
def test_a_dim_bounded_by_another_is_refused_past_it(backend: str) -> None:
    """`Dim("T", max=MAXT)`: the manifest's `max: "MAXT"`; T <= MAXT runs (T = MAXT too),
    T > MAXT is GPU042 before anything is allocated, as the shim refuses it."""
    kernels = load(OUT / backend / "related")
    wpe = _rand(8, 3, seed=2)
    for t in (1, 5, 8):
        x = _rand(2, t, 3, seed=t)
        want = _shim("related", "encoder", {"wte_rows": x, "wpe": wpe},
                     {"B": 2, "T": t, "C": 3, "MAXT": 8})["out"]  # fmt: skip
        assert_close(kernels.encoder(x, wpe).ravel().tolist(), want, "float32")
    with pytest.raises(HostError) as info:
        kernels.encoder(_rand(2, 9, 3), wpe)
    assert info.value.code == "GPU042" and "dim `T`=9 is above its maximum MAXT=8" in str(
        info.value
    )
    with pytest.raises(HostError) as info:
        kernels.window_head(_rand(3, 4), _rand(4, 4))  # W = 3 < T = 4
    assert info.value.code == "GPU042" and "below its minimum T=4" in str(info.value)


def test_slices_sized_by_related_dims_run_and_keep_their_relations() -> None:
    """`x[:, :T]` of a `[B, MAXT]` input (`T <= MAXT`) and `x[:, :S]` of a `[B, CTX]` one
    (`S <= CTX = 16`): each runs at the relation's edge and is refused one past it."""
    kernels = load(OUT / "wgsl" / "related_slices")
    x, y = _rand(3, 6, seed=1), _rand(3, 6, seed=2)
    want = _shim("related_slices", "first_t", {"x": x, "y": y}, {"B": 3, "MAXT": 6, "T": 6})
    assert_close(kernels.first_t(x, y).ravel().tolist(), want["out"], "float32")
    with pytest.raises(HostError) as info:
        kernels.first_t(x, _rand(3, 7))
    assert info.value.code == "GPU042"
    x, y = _rand(2, 16, seed=3), _rand(2, 16, seed=4)
    want = _shim("related_slices", "context_prefix", {"x": x, "y": y}, {"B": 2, "S": 16})
    assert_close(kernels.context_prefix(x, y).ravel().tolist(), want["out"], "float32")
    with pytest.raises(HostError) as info:
        kernels.context_prefix(x, _rand(2, 17))
    assert info.value.code == "GPU042" and "above its maximum 16" in str(info.value)


def _sm90a_linear(folder: Path) -> Path:
    """tests/kernels/out/ptx/linear with `linear_relu`'s first kernel marked `sm_90a`."""
    shutil.copytree(OUT / "ptx" / "linear", folder)
    path = folder / "linear_relu.manifest.json"
    manifest = json.loads(path.read_text())
    manifest["kernels"][0]["requires"] = ["sm_90a"]
    path.write_text(json.dumps(manifest))
    return folder


def test_sm_90a_needs_compute_capability_exactly_9_0() -> None:
    from mimir.runtime.cuda_runner import unmet_requirement

    manifest = {
        "kernels": [{"entry_point": "plain"}, {"entry_point": "mm", "requires": ["sm_90a"]}]
    }
    assert unmet_requirement(manifest, (9, 0)) is None
    assert unmet_requirement({"kernels": [{"entry_point": "plain"}]}, (7, 5)) is None
    for capability in ((8, 0), (8, 9), (10, 0), (12, 0), (9, 1)):
        why = unmet_requirement(manifest, capability, "an old GPU")
        assert why == (
            "kernel `mm` requires `sm_90a` (compute capability 9.0); an old GPU has compute "
            f"capability {capability[0]}.{capability[1]}"
        )


def test_an_sm_90a_kernel_is_refused_before_anything_is_made_on_another_device(
    monkeypatch, tmp_path: Path
) -> None:
    """The device's capability is read once the driver is open, and a kernel its `requires`
    rules out is refused before a buffer or module exists (the driver faked as above)."""
    from harness.ptx_interp import _parse

    from mimir.runtime import cuda_runner

    fake = _FakeDriver()
    loaded: list[str] = []
    monkeypatch.setattr(cuda_runner, "_lib", lambda: fake)
    monkeypatch.setattr(cuda_runner, "_context", lambda: None)
    monkeypatch.setattr(cuda_runner, "_device_name", lambda: "a fake A100")
    monkeypatch.setattr(cuda_runner, "device_capability", lambda: (8, 0))
    monkeypatch.setattr(
        cuda_runner,
        "load_module",
        lambda text, label="": loaded.append(label) or (_parse(text), text),
    )
    kernels = load(_sm90a_linear(tmp_path / "linear"), backend="ptx")
    x, w, b = _rand(2, 20, seed=1), _rand(20, 33, seed=2), _rand(33, seed=3)
    with pytest.raises(cuda_runner.UnmetRequirementError) as refused:
        kernels.linear_relu(x, w, b)
    assert str(refused.value) == (
        "kernel `linear_relu_0_matmul` requires `sm_90a` (compute capability 9.0); a fake A100 "
        "has compute capability 8.0"
    )
    assert fake.memory.regions == [] and loaded == [] and fake.launches == []
    with pytest.raises(cuda_runner.UnmetRequirementError):
        cuda_runner.PtxProgram(kernels.linear_relu.manifest, tmp_path / "linear",
                               {"x": x, "w": w, "b": b}, {"N": 2})  # fmt: skip
    assert fake.memory.regions == []
    monkeypatch.setattr(cuda_runner, "device_capability", lambda: (9, 0))
    got = kernels.linear_relu(x, w, b)  # the interpreter runs the sm_70 text it was given
    want = _shim("linear", "linear_relu", {"x": x, "w": w, "b": b}, {"N": 2})["out"]
    assert_close(got.ravel().tolist(), want, "float32")
