"""Reference Triton candidate for the built-in RMSNorm tasks: one program per row, fp32 accumulation.

Rows up to 8192 wide are held in registers in one block; longer rows are walked twice in 4096-wide blocks
(the sum of squares, then the scaled write).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-6
MAX_BLOCK = 8192


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, x_stride, out_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    out_row = out_ptr + row * out_stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        out = torch.empty_like(rows)
        n_cols = rows.shape[1]
        block = min(triton.next_power_of_2(n_cols), MAX_BLOCK)
        if block < n_cols:
            block = 4096
        warps = 4 if block <= 1024 else (8 if block <= 4096 else 16)
        _rmsnorm_kernel[(rows.shape[0],)](
            rows, self.weight, out, n_cols, rows.stride(0), out.stride(0), EPS, BLOCK=block, num_warps=warps
        )
        return out.view(x.shape)
