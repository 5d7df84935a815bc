"""LayerNorm over the last dimension with a weight and a bias: computed in fp32, returned in the input's
dtype. OFFSET shifts the inputs' mean: a one-pass sum / sum-of-squares variance cancels catastrophically."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# kerneljudge-suite: parameters
DTYPE = torch.float32
SHAPE = (4096, 4096)
SCALE = 1.0
OFFSET = 0.0
# kerneljudge-suite: end
EPS = 1e-5


def wide(t):
    """fp32 for fp32, fp16 and bf16 inputs; float64 when the judge's oracle runs the model in float64."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))

    def forward(self, x):
        y = F.layer_norm(wide(x), (x.shape[-1],), self.weight, self.bias, EPS)
        return y.to(x.dtype)


def get_inputs():
    return [(OFFSET + SCALE * torch.randn(SHAPE)).to(DTYPE)]


def get_init_inputs():
    return [SHAPE[-1]]
