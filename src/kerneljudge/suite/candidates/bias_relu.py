"""Reference Triton candidate for the built-in bias + ReLU tasks: elementwise over the flattened input."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _bias_relu_kernel(x_ptr, b_ptr, out_ptr, n, width, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs % width, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, tl.maximum(x + b, 0.0).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = nn.Parameter(0.5 * torch.randn(width))

    def forward(self, x):
        flat = x.reshape(-1)
        out = torch.empty_like(flat)
        n = flat.numel()
        _bias_relu_kernel[(triton.cdiv(n, BLOCK),)](flat, self.bias, out, n, x.shape[-1], BLOCK=BLOCK, num_warps=8)
        return out.view(x.shape)
