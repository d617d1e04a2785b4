"""A NumPy linear regression by the normal equations."""

import numpy as np

X = np.random.randn(100, 3)
y = np.random.randn(100)
w = np.linalg.solve(X.T @ X, X.T @ y)
pred = X.T @ np.ones((3,))  # E: GPU011
residual = pred - y
print(residual.shape)
