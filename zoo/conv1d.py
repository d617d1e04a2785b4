"""1-D convolution (cross-correlation, stride 1, no padding), as `torch.nn.functional.conv1d`.

Index-level: one program per (batch, output channel, position) sums over input
channels and the width-3 window; every read `x[b, c, t + k]` is proven in bounds.
"""

from mimir.array import Dim, Tensor, float32, gpu, program_id

B = Dim("B")
C_IN = Dim("C_IN")
C_OUT = Dim("C_OUT")
L = Dim("L", min=3)


@gpu(grid=(B, C_OUT, L - 2))
def conv1d(
    x: Tensor[float32, B, C_IN, L],
    w: Tensor[float32, C_OUT, C_IN, 3],
    bias: Tensor[float32, C_OUT],
    out: Tensor[float32, B, C_OUT, L - 2],
):
    b = program_id(0)
    o = program_id(1)
    t = program_id(2)
    acc = bias[o]
    for c in range(C_IN):
        for k in range(3):
            acc += x[b, c, t + k] * w[o, c, k]
    out[b, o, t] = acc


if __name__ == "__main__":
    from mimir.array import rand, zeros

    x, w, bias = rand((1, 2, 6), seed=1), rand((4, 2, 3), seed=2), rand((4,), seed=3)
    out = zeros((1, 4, 4)).to("gpu")
    conv1d(x.to("gpu"), w.to("gpu"), bias.to("gpu"), out)
    print(out)
