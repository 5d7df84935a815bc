"""KernelBench-style: leaky ReLU over a (batch_size, dim) input, its sizes in module-level integers and no
declared shape family, so the judge derives one from them. The public 16 x 1024 elements are a multiple of
every power-of-two block up to 16384; the shapes drawn from the derived family set each size off the powers of
two at least once (tasks/shapes.py), so some drawn shape's count is no multiple of a block of 2048."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
dim = 1024


class Model(nn.Module):
    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.1]
