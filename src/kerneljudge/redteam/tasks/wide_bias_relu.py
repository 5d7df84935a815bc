"""bias_relu with 4 MiB outputs (512 x 2048 float32): a fused digest of an output costs less than the kernel making it
(the commit's matched bound, `commit_window_half`)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(width))

    def forward(self, x):
        return torch.relu(x + self.bias)


def get_inputs():
    return [torch.randn(512, 2048)]


def get_init_inputs():
    return [2048]
