"""Reference Triton candidate for the built-in softmax tasks: one program per row, fp32, the row's maximum
subtracted before exp (large logits stay finite). Rows up to 8192 wide are read once; longer rows are
walked in 4096-wide blocks: the maximum, the sum of exponentials, then the write."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_BLOCK = 8192


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK: tl.constexpr, ONE_BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    out_row = out_ptr + row * out_stride
    if ONE_BLOCK:
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        num = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_row + cols, (num / tl.sum(num, axis=0)).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        top = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            top = tl.maximum(top, tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32))
        peak = tl.max(top, axis=0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
            acc += tl.exp(x - peak)
        total = tl.sum(acc, axis=0)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
            tl.store(out_row + cols, (tl.exp(x - peak) / total).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        out = torch.empty_like(rows)
        n_cols = rows.shape[1]
        block = triton.next_power_of_2(n_cols)
        one_block = block <= MAX_BLOCK
        if not one_block:
            block = 4096
        warps = 4 if block <= 1024 else (8 if block <= 4096 else 16)
        _softmax_kernel[(rows.shape[0],)](
            rows, out, n_cols, rows.stride(0), out.stride(0), BLOCK=block, ONE_BLOCK=one_block, num_warps=warps
        )
        return out.view(x.shape)
