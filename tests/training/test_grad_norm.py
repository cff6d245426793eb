"""The gradient norm a run records (issue 25, item 7): the total L2 norm of all gradients, before clipping."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ablate.training.module import grad_norm


def test_the_gradient_norm_is_the_total_l2_norm_before_clipping():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.Linear(3, 3))
    model[3].weight.requires_grad_(False)  # a frozen parameter has no gradient and counts 0
    model(torch.randn(5, 4)).pow(2).sum().backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    norm = grad_norm(model.parameters())
    assert norm.item() == pytest.approx(grads.norm().item(), rel=1e-6) and norm.item() > 1e-3
    before = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)  # returns the norm before clipping
    assert norm.item() == pytest.approx(before.item(), rel=1e-6)
    assert grad_norm(model.parameters()).item() == pytest.approx(1e-3, rel=1e-3)  # read again: after clipping
    assert grad_norm(nn.Linear(2, 2).parameters()).item() == 0.0  # no step yet
