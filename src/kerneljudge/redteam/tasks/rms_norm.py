"""KernelBench-style: RMS normalisation over the last dimension of a (batch_size, dim) fp32 input, its sizes
in module-level integers (the judge derives a shape family from them)."""
import torch
import torch.nn as nn

batch_size = 64
dim = 4096


class Model(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [1e-6]
