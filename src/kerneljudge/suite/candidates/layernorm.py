"""Reference Triton candidate for the built-in LayerNorm tasks: one program per row, fp32, the variance
from deviations around the mean (a pass for the mean, one for the variance, one for the write), all taken
relative to the row's first value, so that inputs with a large common offset keep their precision."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-5
MAX_BLOCK = 8192


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, x_stride, out_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    out_row = out_ptr + row * out_stride
    # Work on x - k, k the row's first value: with a large common offset (mean 1000, std 1) x - k is exact,
    # and the mean and the deviations keep fp32's precision instead of the offset's.
    k = tl.load(x_row).to(tl.float32)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        acc += tl.where(mask, tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) - k, 0.0)
    shift = tl.sum(acc, axis=0) / n_cols  # mean(x) - k
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, (x - k) - shift, 0.0)
        acc += d * d
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (((x - k) - shift) * rstd * w + b).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        out = torch.empty_like(rows)
        n_cols = rows.shape[1]
        block = min(triton.next_power_of_2(n_cols), MAX_BLOCK)
        if block < n_cols:
            block = 4096
        warps = 4 if block <= 1024 else (8 if block <= 4096 else 16)
        _layernorm_kernel[(rows.shape[0],)](
            rows, self.weight, self.bias, out, n_cols, rows.stride(0), out.stride(0), EPS, BLOCK=block, num_warps=warps
        )
        return out.view(x.shape)
