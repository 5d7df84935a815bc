"""Reference: relu(x + bias) with a learnable bias of shape (4099,), fp32, x of shape (256, 4099)."""
import torch
import torch.nn as nn

ROWS = 256
COLS = 4099


class Model(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.bias)


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=torch.float32)]


def get_init_inputs():
    return [COLS]
