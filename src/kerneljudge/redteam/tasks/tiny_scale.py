"""A task with a tiny output scale: relu(x + bias) times 1e-5, every value below KernelBench's fp32 atol."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(width))

    def forward(self, x):
        return torch.relu(x + self.bias) * 1e-5


def get_inputs():
    return [torch.randn(16, 33)]


def get_init_inputs():
    return [33]
