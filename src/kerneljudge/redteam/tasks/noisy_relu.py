"""A task whose reference adds noise in its forward: `torch.randn_like`, which the float64 oracle draws anew
(other numbers than the float32 reference's from the same seed), so the comparison's slack holds the noise and
any output near relu(x) passes. The reference's replay from another random state finds it (KJ-T003)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) + 0.25 * torch.randn_like(x)


def get_inputs():
    return [torch.randn(24, 80)]


def get_init_inputs():
    return []
