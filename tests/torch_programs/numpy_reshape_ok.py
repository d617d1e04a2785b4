"""NumPy preprocessing: flatten images and standardise features."""

import numpy as np

images = np.random.rand(50, 28, 28)
flat = images.reshape(50, 784)
mean = flat.mean(axis=0)
std = flat.std(axis=0) + 1e-6
normed = (flat - mean) / std
print(normed.shape)
