"""Honest candidate: one Triton program per row, whole row in one padded block, fp32 softmax."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_row_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    num = tl.where(mask, num, 0.0)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * row_stride + cols, out, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.contiguous().view(-1, shape[-1])
        n_rows, n_cols = x2.shape
        out = torch.empty_like(x2)
        block = triton.next_power_of_2(n_cols)
        _softmax_row_kernel[(n_rows,)](x2, out, n_cols, x2.stride(0), BLOCK=block)
        return out.view(shape)
