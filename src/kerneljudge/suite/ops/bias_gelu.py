"""Bias add + exact (erf) GELU over the last dimension: computed in fp32, returned in the input's dtype."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# kerneljudge-suite: parameters
DTYPE = torch.float32
SHAPE = (4096, 4096)
SCALE = 1.0
# kerneljudge-suite: end


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = nn.Parameter(0.5 * torch.randn(width))

    def forward(self, x):
        return F.gelu(x.float() + self.bias).to(x.dtype)


def get_inputs():
    return [(SCALE * torch.randn(SHAPE)).to(DTYPE)]


def get_init_inputs():
    return [SHAPE[-1]]
