"""Reference Triton candidate for the built-in fused residual + RMSNorm tasks: one program per row; the sum
h = x + residual is written once (in the input's dtype) and re-read for the normalisation, in fp32."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-6
MAX_BLOCK = 8192


@triton.jit
def _add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, h_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        h = x + r
        tl.store(h_ptr + base + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
        acc += h * h
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        # The reference normalises the fp32 sum, not its rounding to the input's dtype: recompute it.
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + cols, ((x + r) * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x, residual):
        rows = x.reshape(-1, x.shape[-1])
        res = residual.reshape(-1, x.shape[-1])
        if rows.stride() != res.stride():
            rows, res = rows.contiguous(), res.contiguous()
        out = torch.empty_like(rows)
        h = torch.empty_like(rows)
        n_cols = rows.shape[1]
        block = min(triton.next_power_of_2(n_cols), MAX_BLOCK)
        if block < n_cols:
            block = 4096
        warps = 4 if block <= 1024 else (8 if block <= 4096 else 16)
        _add_rmsnorm_kernel[(rows.shape[0],)](
            rows, res, self.weight, out, h, n_cols, rows.stride(0), EPS, BLOCK=block, num_warps=warps
        )
        return out.view(x.shape), h.view(x.shape)
