"""Wrong candidate: applies ReLU to x before adding the bias, i.e. relu(x) + bias."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_relu_kernel(x_ptr, b_ptr, out_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
    y = tl.where(x > 0, x, 0.0) + b
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        bias = self.bias.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 4096
        _bias_relu_kernel[(triton.cdiv(n, BLOCK),)](x, bias, out, n, bias.numel(), BLOCK=BLOCK)
        return out
