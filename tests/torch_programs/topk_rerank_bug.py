"""Re-ranking: keep each query's best candidates by score, then score them again."""

import torch
import torch.nn as nn

queries = torch.randn(8, 32)
candidates = torch.randn(8, 100, 32)
scores = torch.einsum("qd,qcd->qc", queries, candidates)
best, positions = scores.topk(10, dim=-1)
kept = torch.gather(candidates, 1, positions[:, :, None].expand(-1, -1, 32))
rescore = nn.Linear(32, 1)
final = rescore(kept).squeeze(-1) + scores  # E: GPU010
order = torch.argsort(final, dim=1, descending=True)
ranked, _ = torch.sort(final, dim=-1)
print(order.shape, ranked.shape)
