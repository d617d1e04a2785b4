"""NumPy batches converted to torch for a linear model."""

import numpy as np
import torch
import torch.nn as nn

batch = np.random.rand(16, 28, 28).astype(np.float32)
x = torch.from_numpy(batch).view(16, 28, -1)
model = nn.Linear(784, 10)
logits = model(x)  # E: GPU100
print(logits.shape)
