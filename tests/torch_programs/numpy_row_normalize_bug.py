"""Row-wise standardisation of a feature matrix with NumPy."""

import numpy as np

X = np.random.randn(40, 6)
mu = X.mean(axis=1)
sigma = X.std(axis=1, keepdims=True) + 1e-8
Z = (X - mu) / sigma  # E: GPU010
print(Z.shape)
