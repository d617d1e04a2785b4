"""Joining hand-made features column-wise before a least-squares fit."""

import numpy as np

n = 30
x = np.random.rand(n, 1)
features = np.concatenate([np.ones((n, 1)), x.T, x**2], axis=0)  # E: GPU103
target = np.random.rand(n)
weights = np.linalg.lstsq(features, target, rcond=None)[0]
print(features.shape)
