"""The browser demo's model: an 8x8 glyph classifier, a two-layer perceptron with a softmax.

`mimir compile-gpu examples/web/model.py --backend wgsl -o examples/web/kernels` writes the
kernels the page runs; `python examples/web/make_data.py` writes its weights and inputs.
"""

from mimir.array import Dim, Tensor, float32, gpu

B = Dim("B")
H = Dim("H")


@gpu
def classify(
    x: Tensor[float32, B, 64],
    w1: Tensor[float32, 64, H],
    b1: Tensor[float32, H],
    w2: Tensor[float32, H, 10],
    b2: Tensor[float32, 10],
) -> Tensor[float32, B, 10]:
    hidden = (x @ w1 + b1).relu()
    return (hidden @ w2 + b2).softmax()
