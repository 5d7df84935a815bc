"""SwiGLU's activation: silu(gate) * up, computed in fp32, returned in the inputs' dtype."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# kerneljudge-suite: parameters
DTYPE = torch.float32
SHAPE = (4096, 4096)
SCALE = 1.0
# kerneljudge-suite: end


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, gate, up):
        return (F.silu(gate.float()) * up.float()).to(gate.dtype)


def get_inputs():
    return [(SCALE * torch.randn(SHAPE)).to(DTYPE), (SCALE * torch.randn(SHAPE)).to(DTYPE)]


def get_init_inputs():
    return []
