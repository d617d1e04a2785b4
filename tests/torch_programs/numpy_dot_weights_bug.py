"""A forward pass of a tiny two-layer network in plain NumPy."""

import numpy as np

X = np.random.randn(8, 4)
W1 = np.random.randn(4, 16)
W2 = np.random.randn(3, 16)
h = np.maximum(0, X @ W1)
out = h @ W2  # E: GPU011
print(out.shape)
