"""2-D convolution (3x3 kernel, stride 1, no padding) over a batch, as `F.conv2d`.

Index-level: one program per (output channel, row, column), looping over the
batch, the input channels and the window.
"""

from mimir.array import Dim, Tensor, float32, gpu, program_id

B = Dim("B")
C_IN = Dim("C_IN")
C_OUT = Dim("C_OUT")
H = Dim("H", min=3)
W = Dim("W", min=3)


@gpu(grid=(C_OUT, H - 2, W - 2))
def conv2d(
    x: Tensor[float32, B, C_IN, H, W],
    w: Tensor[float32, C_OUT, C_IN, 3, 3],
    out: Tensor[float32, B, C_OUT, H - 2, W - 2],
):
    o = program_id(0)
    r = program_id(1)
    s = program_id(2)
    for b in range(B):
        acc = 0.0
        for c in range(C_IN):
            for i in range(3):
                for j in range(3):
                    acc += x[b, c, r + i, s + j] * w[o, c, i, j]
        out[b, o, r, s] = acc


if __name__ == "__main__":
    from mimir.array import rand, zeros

    x, w = rand((1, 1, 4, 5), seed=1), rand((2, 1, 3, 3), seed=2)
    out = zeros((1, 2, 2, 3)).to("gpu")
    conv2d(x.to("gpu"), w.to("gpu"), out)
    print(out)
