"""A long fp32 reduction: the sum of each row of an 8 x 65536 matrix of uniform values."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=1)


def get_inputs():
    return [torch.rand(8, 65536)]


def get_init_inputs():
    return []
