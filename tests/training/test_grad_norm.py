"""The gradient norm a run records: the total L2 norm of all gradients, before clipping,
from the same computation that clips (one norm a step, not two)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ablate.training.module import clip_gradients


def test_the_gradient_norm_is_the_total_l2_norm_before_clipping():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.Linear(3, 3))
    model[3].weight.requires_grad_(False)  # a frozen parameter has no gradient and counts 0
    model(torch.randn(5, 4)).pow(2).sum().backward()
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    total = torch.cat([g.flatten() for g in grads]).norm().item()
    assert clip_gradients(model.parameters(), None).item() == pytest.approx(total, rel=1e-6) and total > 1e-3
    assert all(torch.equal(p.grad, g) for p, g in zip([p for p in model.parameters() if p.grad is not None], grads))
    norm = clip_gradients(model.parameters(), 1e-3)  # clips, and returns the norm before clipping
    assert norm.item() == pytest.approx(total, rel=1e-6)
    coef = 1e-3 / (total + 1e-6)  # torch.nn.utils.clip_grad_norm_'s, which Lightning's gradient_clip_val calls
    after = [p.grad for p in model.parameters() if p.grad is not None]
    assert all(torch.allclose(a, g * coef, rtol=1e-6, atol=0) for a, g in zip(after, grads))
    assert clip_gradients(model.parameters(), None).item() == pytest.approx(1e-3, rel=1e-3)  # read again: clipped
    assert clip_gradients(nn.Linear(2, 2).parameters(), 1.0).item() == 0.0  # no step yet
