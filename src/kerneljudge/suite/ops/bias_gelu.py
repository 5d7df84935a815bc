"""Bias add + exact (erf) GELU over the last dimension: computed in fp32, returned in the input's dtype."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# kerneljudge-suite: parameters
DTYPE = torch.float32
SHAPE = (4096, 4096)
SCALE = 1.0
SHAPE_FAMILY = {"SHAPE": [(1, 127), (3, 4097), (64, 2880)]}  # the suite writes its operation's whole family
# kerneljudge-suite: end


def wide(t):
    """fp32 for fp32, fp16 and bf16 inputs; float64 when the judge's oracle runs the model in float64."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = nn.Parameter(0.5 * torch.randn(width))

    def forward(self, x):
        return F.gelu(wide(x) + self.bias).to(x.dtype)


def get_inputs():
    return [(SCALE * torch.randn(SHAPE)).to(DTYPE)]


def get_init_inputs():
    return [SHAPE[-1]]
