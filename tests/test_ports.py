"""The ports corpus (`tests/kernels/ports_*.py`): Triton kernels of Liger-Kernel, unsloth,
FlashAttention and xformers written in Mimir's kernel language. Each port runs under the shim
at odd sizes and is compared with a NumPy float64 reference written from the maths the
original computes (a definition, a PyTorch formula, a finite difference), not from its
Triton code. The backends are compared with the shim by the zoo's execution tests
(`tests/test_backends_exec.py`, `tests/test_ptx_exec.py`, `-k ports`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import import_file

from mimir.array import bfloat16, float16, float32, int32, tensor

KERNELS = Path(__file__).resolve().parent / "kernels"
LIGER = import_file(KERNELS / "ports_liger.py")
UNSLOTH = import_file(KERNELS / "ports_unsloth.py")
FLASH = import_file(KERNELS / "ports_flash.py")
XFORMERS = import_file(KERNELS / "ports_xformers.py")
IGNORE = -100


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _gpu(values: np.ndarray, dtype=float32):
    return tensor(np.asarray(values).tolist(), dtype=dtype).to("gpu")


def _held(values: np.ndarray, dtype) -> np.ndarray:
    """The values a tensor of `dtype` holds for `values`: what the kernel reads."""
    return np.array(_gpu(values, dtype).tolist(), dtype=np.float64)


def _np(result) -> np.ndarray:
    return np.array(result.tolist(), dtype=np.float64)


def _close(got, want: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    np.testing.assert_allclose(_np(got), want, rtol=rtol, atol=atol)


def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _logsumexp(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))).squeeze(axis)


def _labels(rng: np.random.Generator, n: int, v: int, ignored: int) -> np.ndarray:
    labels = rng.integers(0, v, size=n)
    labels[rng.choice(n, size=ignored, replace=False)] = IGNORE
    return labels


# ------------------------------------------------------------------------------ Liger-Kernel


def test_liger_rms_norm() -> None:
    x, w = _rng(1).uniform(-2, 2, (37, 129)), _rng(2).uniform(-1, 1, 129)
    y, rstd = LIGER.liger_rms_norm(_gpu(x), _gpu(w), 1e-6, 1.0)
    want_rstd = 1.0 / np.sqrt((x**2).mean(axis=1) + 1e-6)
    _close(rstd, want_rstd)
    _close(y, x * want_rstd[:, None] * (1.0 + w))


def test_liger_rms_norm_bf16_rounds_once_before_the_weight() -> None:
    x = _held(_rng(3).uniform(-2, 2, (37, 129)), bfloat16)
    w = _held(_rng(4).uniform(-1, 1, 129), bfloat16)
    y = LIGER.liger_rms_norm_bf16(_gpu(x, bfloat16), _gpu(w, bfloat16), 1e-6)
    assert y.dtype == bfloat16
    normed = x / np.sqrt((x**2).mean(axis=1, keepdims=True) + 1e-6)
    # two bfloat16 roundings (the normalised value, the product): 2 * 2**-8 relative
    _close(y, normed * w, rtol=2**-7, atol=1e-6)


def test_liger_fused_add_rms_norm() -> None:
    x, r = _rng(5).uniform(-1, 1, (2, 37, 65))
    w = _rng(6).uniform(-1, 1, 65)
    y, s = LIGER.liger_fused_add_rms_norm(_gpu(x), _gpu(r), _gpu(w), 1e-5)
    total = x + r
    _close(s, total)
    _close(y, total / np.sqrt((total**2).mean(axis=1, keepdims=True) + 1e-5) * w)


def test_liger_layer_norm() -> None:
    x = _rng(7).normal(3.0, 2.0, (37, 129))
    w, b = _rng(8).uniform(-1, 1, 129), _rng(9).uniform(-1, 1, 129)
    mean, var = x.mean(axis=1), x.var(axis=1)
    want = (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-5) * w + b
    y, got_mean, rstd = LIGER.liger_layer_norm(_gpu(x), _gpu(w), _gpu(b), 1e-5)
    _close(y, want, rtol=1e-4, atol=1e-4)
    _close(got_mean, mean)
    _close(rstd, 1.0 / np.sqrt(var + 1e-5))


def test_liger_swiglu_and_geglu() -> None:
    a, b = _rng(10).uniform(-4, 4, (2, 37, 129))
    silu = a / (1.0 + np.exp(-a))
    _close(LIGER.liger_swiglu(_gpu(a), _gpu(b)), silu * b)
    tanh_gelu = 0.5 * a * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a**3)))
    _close(LIGER.liger_geglu(_gpu(a), _gpu(b)), tanh_gelu * b)


def test_liger_swiglu_bf16() -> None:
    a, b = (_held(v, bfloat16) for v in _rng(11).uniform(-4, 4, (2, 37, 129)))
    got = LIGER.liger_swiglu_bf16(_gpu(a, bfloat16), _gpu(b, bfloat16))
    assert got.dtype == bfloat16
    _close(got, a / (1.0 + np.exp(-a)) * b, rtol=2**-7, atol=1e-6)


def _rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def _rope_tables(t: int, half: int) -> tuple[np.ndarray, np.ndarray]:
    """Hugging Face's tables: the angle of each position and frequency, both halves alike."""
    freqs = 1.0 / 10000 ** (np.arange(half) / half)
    angles = np.arange(t)[:, None] * freqs[None, :]
    full = np.concatenate([angles, angles], axis=-1)
    return np.cos(full), np.sin(full)


def test_liger_rope() -> None:
    b, h, t, half = 2, 3, 37, 8
    q, k = _rng(12).uniform(-1, 1, (2, b, h, t, 2 * half))
    cos, sin = _rope_tables(t, half)
    got_q, got_k = LIGER.liger_rope(_gpu(q), _gpu(k), _gpu(cos), _gpu(sin))
    _close(got_q, q * cos + _rotate_half(q) * sin)
    _close(got_k, k * cos + _rotate_half(k) * sin)


def _smoothed_cross_entropy(logits, labels, smoothing, z_scale):
    """PyTorch's `cross_entropy(label_smoothing=...)` per row, plus PaLM's z-loss."""
    log_probs = logits - _logsumexp(logits)[:, None]
    rows = np.arange(len(labels))
    nll = -log_probs[rows, np.maximum(labels, 0)]
    per_row = (1 - smoothing) * nll - smoothing * log_probs.mean(axis=1)
    return per_row + z_scale * _logsumexp(logits) ** 2


def test_liger_cross_entropy_loss_and_gradient() -> None:
    rng = _rng(13)
    logits, labels = rng.uniform(-3, 3, (37, 129)), _labels(rng, 37, 129, ignored=5)
    kept = labels != IGNORE
    n = float(kept.sum())
    smoothing, z_scale = 0.2, 0.05
    loss, grad = LIGER.liger_cross_entropy(_gpu(logits), _gpu(labels, int32), n, smoothing, z_scale)
    per_row = _smoothed_cross_entropy(logits, labels, smoothing, z_scale)
    _close(loss, np.float64(per_row[kept].sum() / n), rtol=1e-5)
    # the gradient by central differences of the mean loss, at a few elements of kept rows
    got = _np(grad)
    assert not got[~kept].any()
    step = 1e-5
    for i, col in [(0, 3), (int(np.flatnonzero(kept)[1]), 100), (36, 128)]:
        if not kept[i]:
            continue
        for j in (col, labels[i]):
            up, down = logits.copy(), logits.copy()
            up[i, j] += step
            down[i, j] -= step
            rise = _smoothed_cross_entropy(up, labels, smoothing, z_scale)[i]
            fall = _smoothed_cross_entropy(down, labels, smoothing, z_scale)[i]
            assert got[i, j] == pytest.approx((rise - fall) / (2 * step) / n, rel=1e-3, abs=1e-9)


def test_liger_fused_linear_cross_entropy() -> None:
    rng = _rng(14)
    x, w = rng.uniform(-1, 1, (37, 24)), rng.uniform(-1, 1, (129, 24))
    labels = rng.integers(0, 129, 37)
    got = LIGER.liger_fused_linear_cross_entropy(_gpu(x), _gpu(w), _gpu(labels, int32))
    logits = x @ w.T
    want = (_logsumexp(logits) - logits[np.arange(37), labels]).mean()
    _close(got, np.float64(want))


def test_liger_kl_div_batchmean() -> None:
    rng = _rng(15)
    y_pred = np.log(_softmax(rng.uniform(-3, 3, (37, 129))))
    y_true = _softmax(rng.uniform(-3, 3, (37, 129)))
    y_true[0, :5] = 0.0  # a zero probability adds nothing (0 log 0 = 0)
    got = LIGER.liger_kl_div(_gpu(y_pred), _gpu(y_true), 1e-10)
    safe = np.where(y_true > 0, y_true, 1.0)
    want = np.where(y_true > 0, y_true * (np.log(safe) - y_pred), 0.0).sum() / 37
    _close(got, np.float64(want))


def _jsd(x: np.ndarray, y: np.ndarray, beta: float) -> float:
    """beta KL(P || M) + (1 - beta) KL(Q || M), M = beta P + (1 - beta) Q, P = e^y, Q = e^x."""
    p, q = np.exp(y), np.exp(x)
    mix = beta * p + (1 - beta) * q
    return float((beta * p * np.log(p / mix) + (1 - beta) * q * np.log(q / mix)).sum())


def test_liger_jsd_loss_and_gradient() -> None:
    rng = _rng(16)
    x = np.log(_softmax(rng.uniform(-2, 2, (37, 65))))
    y = np.log(_softmax(rng.uniform(-2, 2, (37, 65))))
    loss, grad = LIGER.liger_jsd(_gpu(x), _gpu(y), 0.3)
    _close(loss, np.float64(_jsd(x, y, 0.3) / 37))
    got, step = _np(grad), 1e-6
    for i, j in [(0, 0), (17, 40), (36, 64)]:
        up, down = x.copy(), x.copy()
        up[i, j] += step
        down[i, j] -= step
        slope = (_jsd(up, y, 0.3) - _jsd(down, y, 0.3)) / (2 * step) / 37
        assert got[i, j] == pytest.approx(slope, rel=1e-3, abs=1e-7)


def test_liger_group_norm() -> None:
    rng = _rng(17)
    b, g, cg, positions = 2, 3, 5, 37
    x = rng.normal(1.0, 2.0, (b, g * cg, positions))
    w, bias = rng.uniform(-1, 1, g * cg), rng.uniform(-1, 1, g * cg)
    grouped = x.reshape(b, g, cg * positions)
    normed = (grouped - grouped.mean(axis=2, keepdims=True)) / np.sqrt(
        grouped.var(axis=2, keepdims=True) + 1e-6
    )
    want = normed.reshape(b, g * cg, positions) * w[:, None] + bias[:, None]
    got = LIGER.liger_group_norm(
        _gpu(x.reshape(b, g, cg, positions)), _gpu(w.reshape(g, cg)), _gpu(bias.reshape(g, cg))
    )
    _close(got, want.reshape(b, g, cg, positions), atol=1e-4)


def test_liger_dyt_softmax_and_tvd() -> None:
    rng = _rng(18)
    x = rng.uniform(-3, 3, (37, 129))
    gamma, beta = rng.uniform(-1, 1, 129), rng.uniform(-1, 1, 129)
    _close(
        LIGER.liger_dyt(_gpu(x), _gpu(np.array([0.7])), _gpu(gamma), _gpu(beta)),
        gamma * np.tanh(0.7 * x) + beta,
    )
    _close(LIGER.liger_softmax(_gpu(x)), _softmax(x), atol=1e-7)
    p, q = _softmax(x), _softmax(rng.uniform(-3, 3, (37, 129)))
    loss, grad = LIGER.liger_tvd(_gpu(p), _gpu(q))
    _close(loss, np.float64(0.5 * np.abs(p - q).sum() / 37))
    _close(grad, np.where(p > q, 0.5, -0.5) / 37)


# ------------------------------------------------------------------------------------ unsloth


def test_unsloth_rms_layernorm_float16_and_gemma() -> None:
    rng = _rng(19)
    x = _held(rng.uniform(-2, 2, (37, 129)), float16)
    w = _held(rng.uniform(-1, 1, 129), float16)
    y, inv_var = UNSLOTH.unsloth_rms_layernorm(_gpu(x, float16), _gpu(w, float16), 1e-6)
    want_inv = 1.0 / np.sqrt((x**2).mean(axis=1) + 1e-6)
    _close(inv_var, want_inv)
    assert y.dtype == float16
    _close(y, x * want_inv[:, None] * w, rtol=2**-9, atol=1e-6)
    xf = rng.uniform(-2, 2, (37, 129))
    gemma = UNSLOTH.unsloth_gemma_rms_layernorm(_gpu(xf), _gpu(w), 1e-6)
    _close(gemma, xf / np.sqrt((xf**2).mean(axis=1, keepdims=True) + 1e-6) * (w + 1.0))


def test_unsloth_rope_updates_q_in_place() -> None:
    b, t, h, half = 2, 37, 3, 8
    q = _rng(20).uniform(-1, 1, (b, t, h, 2 * half))
    cos, sin = _rope_tables(t, half)
    held = _gpu(q)
    assert UNSLOTH.unsloth_rope_inplace(held, _gpu(cos), _gpu(sin)) is None
    _close(held, q * cos[:, None, :] + _rotate_half(q) * sin[:, None, :])


def test_unsloth_swiglu_and_geglu() -> None:
    e, g = (_held(v, float16) for v in _rng(21).uniform(-4, 4, (2, 37, 129)))
    got = UNSLOTH.unsloth_swiglu(_gpu(e, float16), _gpu(g, float16))
    _close(got, e / (1.0 + np.exp(-e)) * g, rtol=2**-9, atol=1e-5)
    from math import erf

    exact = 0.5 * e * (1.0 + np.vectorize(erf)(e / np.sqrt(2.0)))
    _close(UNSLOTH.unsloth_geglu_exact(_gpu(e), _gpu(g)), exact * g, atol=1e-5)
    approx = 0.5 * e * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (e + 0.044715 * e**3)))
    _close(UNSLOTH.unsloth_geglu_approx(_gpu(e), _gpu(g)), approx * g)


def _softcapped_losses(logits: np.ndarray, labels: np.ndarray, cap: float) -> np.ndarray:
    capped = cap * np.tanh(logits / cap)
    loss = _logsumexp(capped) - capped[np.arange(len(labels)), np.maximum(labels, 0)]
    return np.where(labels != IGNORE, loss, 0.0)


def test_unsloth_cross_entropy_softcap_and_backward() -> None:
    rng = _rng(22)
    logits, labels = rng.uniform(-40, 40, (37, 129)), _labels(rng, 37, 129, ignored=4)
    cap = 30.0
    losses, lse = UNSLOTH.unsloth_cross_entropy_softcap(_gpu(logits), _gpu(labels, int32), cap)
    _close(losses, _softcapped_losses(logits, labels, cap), atol=1e-4)
    _close(lse, _logsumexp(cap * np.tanh(logits / cap)), atol=1e-4)
    dloss = rng.uniform(0.5, 1.5, 37)
    grad = _np(
        UNSLOTH.unsloth_cross_entropy_backward(
            _gpu(logits), _gpu(dloss), lse, _gpu(labels, int32), cap
        )
    )
    assert not grad[labels == IGNORE].any()
    step = 1e-5
    for i in np.flatnonzero(labels != IGNORE)[:3]:
        for j in (0, 64, labels[i]):
            up, down = logits.copy(), logits.copy()
            up[i, j] += step
            down[i, j] -= step
            slope = (
                _softcapped_losses(up, labels, cap)[i] - _softcapped_losses(down, labels, cap)[i]
            ) / (2 * step)
            assert grad[i, j] == pytest.approx(dloss[i] * slope, rel=1e-3, abs=1e-6)


# ---------------------------------------------------------------------------- FlashAttention


def _attention(q, k, v, scores_bias, scale, causal):
    scores = q @ k.swapaxes(-1, -2) * scale + scores_bias
    if causal:
        t = scores.shape[-1]
        scores = np.where(np.tril(np.ones((t, t))) > 0, scores, -np.inf)
    return _softmax(scores) @ v, _logsumexp(scores)


def test_flash_forward_with_a_matrix_bias() -> None:
    rng = _rng(23)
    q, k, v = rng.uniform(-1, 1, (2, 2, 37, 16)), *rng.uniform(-1, 1, (2, 2, 2, 29, 16))
    bias = rng.uniform(-1, 1, (2, 2, 37, 29))
    out, lse = FLASH.flash_fwd_matrix_bias(_gpu(q), _gpu(k), _gpu(v), _gpu(bias), 0.25)
    want, want_lse = _attention(q, k, v, bias, 0.25, causal=False)
    _close(out, want)
    _close(lse, want_lse)


def test_flash_forward_float16_causal_with_a_vector_bias() -> None:
    rng = _rng(24)
    q, k, v = (_held(a, float16) for a in rng.uniform(-1, 1, (3, 2, 2, 37, 16)))
    bias = rng.uniform(-1, 1, (2, 2, 37))
    out, lse = FLASH.flash_fwd_vector_bias_causal_f16(
        _gpu(q, float16), _gpu(k, float16), _gpu(v, float16), _gpu(bias), 0.25
    )
    assert out.dtype == float16
    want, want_lse = _attention(q, k, v, bias[:, :, None, :], 0.25, causal=True)
    # float32 throughout, from float16 inputs; the output rounds once to float16
    _close(out, want, rtol=2**-10, atol=1e-6)
    _close(lse, want_lse)


# ----------------------------------------------------------------------------------- xformers


@pytest.mark.parametrize(
    "name", ["xformers_dropout_bias_gelu", "xformers_dropout_bias_squared_relu"]
)
def test_xformers_dropout_keeps_about_one_minus_p_and_scales_what_it_keeps(name: str) -> None:
    rng = _rng(26)
    x, bias = rng.uniform(-2, 2, (37, 129)), rng.uniform(-1, 1, 129)
    y = x + bias
    if name.endswith("gelu"):
        act = 0.5 * y * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y**3)))
    else:
        act = np.maximum(y, 0.0) ** 2
    port = getattr(XFORMERS, name)
    got = _np(port(_gpu(x), _gpu(bias), 0.25, 7))
    kept = got != 0.0
    assert 0.70 < kept[act != 0.0].mean() < 0.80  # thousands of draws at p = 0.25
    np.testing.assert_allclose(got[kept], act[kept] / 0.75, rtol=1e-4, atol=1e-5)
    assert np.array_equal(_np(port(_gpu(x), _gpu(bias), 0.25, 7)), got)  # the seed fixes it
    assert not np.array_equal(_np(port(_gpu(x), _gpu(bias), 0.25, 8)) != 0.0, kept)


def test_xformers_causal_log_softmax() -> None:
    rng = _rng(27)
    x, mask = rng.uniform(-3, 3, (2, 37, 37)), rng.uniform(-1, 1, (37, 37))
    got = _np(XFORMERS.xformers_causal_log_softmax(_gpu(x), _gpu(mask)))
    above = np.triu(np.ones((37, 37), dtype=bool), k=1)
    scores = np.where(above, -np.inf, x + mask)
    want = scores - _logsumexp(scores)[..., None]
    np.testing.assert_allclose(got[:, ~above], want[:, ~above], rtol=1e-4, atol=1e-5)
    assert (got[:, above] < -1e29).all()  # -inf in the original: exp() of it is 0 alike
