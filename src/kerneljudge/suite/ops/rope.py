"""Rotary position embedding (GPT-NeoX layout, rotating halves) of x of shape (batch, seq, heads, head_dim):
computed in fp32, returned in the input's dtype. The angles are buffers fixed by (seq, head_dim)."""

import torch
import torch.nn as nn

# kerneljudge-suite: parameters
DTYPE = torch.float32
SHAPE = (4, 2048, 32, 128)
SCALE = 1.0
SHAPE_FAMILY = {"SHAPE": [(1, 1, 1, 2), (2, 33, 5, 96)]}  # the suite writes its operation's whole family
# kerneljudge-suite: end
BASE = 10000.0


def wide(t):
    """fp32 for fp32, fp16 and bf16 inputs; float64 when the judge's oracle runs the model in float64."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


class Model(nn.Module):
    def __init__(self, seq, head_dim):
        super().__init__()
        inv_freq = 1.0 / BASE ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(seq, dtype=torch.float64), inv_freq)
        self.register_buffer("cos", angles.cos().float())
        self.register_buffer("sin", angles.sin().float())

    def forward(self, x):
        half = x.shape[-1] // 2
        xf = wide(x)
        x1, x2 = xf[..., :half], xf[..., half:]
        cos, sin = self.cos[None, :, None, :], self.sin[None, :, None, :]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


def get_inputs():
    return [(SCALE * torch.randn(SHAPE)).to(DTYPE)]


def get_init_inputs():
    return [SHAPE[1], SHAPE[3]]
