"""Reference: row-wise softmax over the last dim, fp32, width 1000 (not a power of two)."""
import torch
import torch.nn as nn

BATCH = 64
WIDTH = 1000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, WIDTH, dtype=torch.float32)]


def get_init_inputs():
    return []
