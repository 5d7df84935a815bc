"""The commit's digest (worker/seal/digest.py) fused into a few kernels on a CUDA device.

The tree's operators cost a kernel each, seven a level and some twenty levels for a 4 MiB output: even replayed from
a CUDA graph (worker/seal/digest_graphs.py) a digest took 0.38 ms on an H100 against 0.024 ms for a kernel making that
output (2026-12-06, judge 0.3.13, benchmarks/commit_digest_cost.py), and the room KJ-R027 leaves a candidate's commit
grows with the reference's (docs/timing.md, "What the commit window still holds"). Here one kernel mixes four leaves,
adds their words' weighted first sum and combines them two levels up; each further kernel combines eight nodes three
levels up. A 4 MiB output is then seven kernels and one sum, its words read once.

The kernels are compiled at run time by torch's jiterator (NVRTC), from the source below, into the process's own
cache and the worker's private workspace (sandbox/workspace.py): nothing another process wrote is loaded. They compute
the tree `commit_digest.tree_root` defines, padding included, so a digest taken here is the operators' to the bit
(tests/gpu/test_gpu_digest_graphs.py). Where the jiterator cannot run (no NVRTC, a CPU tensor), `commit_digest` takes
the operators' path.

The launcher is bound when this module is imported, before any candidate code runs; the seal compares this module's
namespace (worker/seal_scope.WORKER_MODULES), so a candidate cannot put its own function in its place."""

from __future__ import annotations

from typing import Any

import torch

_LAUNCH = getattr(torch._C, "_cuda_jiterator_compile_and_launch_kernel", None)

# splitmix64's finaliser, `combine` and the leaves' first sum, as commit_digest's operators compute them on int64
# words wrapping at 2**64 (unsigned here: C++ leaves a signed overflow undefined).
_COMMON = """
typedef unsigned long long kj_u64;
__device__ kj_u64 kj_mix(kj_u64 x) {
  x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27; x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ kj_u64 kj_comb(kj_u64 left, kj_u64 right, kj_u64 level) {
  kj_u64 node = (left * 0xD6E8FEB86659FD93ull) ^ right ^ level;
  return (node ^ (node >> 29)) * 0xBF58476D1CE4E5B9ull;
}
"""

LEAVES = (
    _COMMON
    + """
template <typename T> void kj_leaves(T w0, T w1, T w2, T w3, T group, T seed, T start, T packed, T count,
                                     T& node, T& part) {
  const kj_u64 words[4] = {(kj_u64)w0, (kj_u64)w1, (kj_u64)w2, (kj_u64)w3};
  kj_u64 leaf[4];
  kj_u64 sum = 0;
  for (int k = 0; k < 4; ++k) {
    const long long index = 4 * (long long)group + k;
    if (index >= (long long)count) { leaf[k] = 0x5851F42D4C957F2Dull; continue; }
    leaf[k] = kj_mix(words[k] ^ ((kj_u64)index * 0x9E3779B97F4A7C15ull + (kj_u64)seed));
    if (packed) {
      const kj_u64 at = (kj_u64)start + 2 * (kj_u64)index;
      const kj_u64 low = (kj_u64)(long long)(int)(unsigned)(words[k] & 0xFFFFFFFFull);
      const kj_u64 high = (kj_u64)(long long)(int)(unsigned)(words[k] >> 32);
      sum += low * (2 * at + 1) + high * (2 * at + 3);
    } else {
      sum += words[k] * (2 * ((kj_u64)start + (kj_u64)index) + 1);
    }
  }
  node = (T)kj_comb(kj_comb(leaf[0], leaf[1], 1), kj_comb(leaf[2], leaf[3], 1), 2);
  part = (T)sum;
}
"""
)

LEVELS = (
    _COMMON
    + """
template <typename T> T kj_levels(T a0, T a1, T a2, T a3, T a4, T a5, T a6, T a7, T level) {
  const kj_u64 l = (kj_u64)level;
  const kj_u64 b0 = kj_comb((kj_u64)a0, (kj_u64)a1, l), b1 = kj_comb((kj_u64)a2, (kj_u64)a3, l);
  const kj_u64 b2 = kj_comb((kj_u64)a4, (kj_u64)a5, l), b3 = kj_comb((kj_u64)a6, (kj_u64)a7, l);
  return (T)kj_comb(kj_comb(b0, b1, l + 1), kj_comb(b2, b3, l + 1), l + 2);
}
"""
)


def leaves(views: list[torch.Tensor], group: torch.Tensor, seed: int, start: int, packed: bool, count: int) -> Any:
    """(the level-2 nodes, the first sum's parts) of each four leaves (views[k] the k-th of each four), group being
    each four's number: leaves at `count` or past it are the tree's padding and add nothing to the sum."""
    params = {"seed": seed, "start": start, "packed": int(packed), "count": count}
    return _LAUNCH(LEAVES, "kj_leaves", True, 2, (*views, group), params)


def levels(views: list[torch.Tensor], level: int) -> torch.Tensor:
    """The node three levels up of each eight (views[k] the k-th of each eight), the first combined at `level`."""
    out = _LAUNCH(LEVELS, "kj_levels", False, 1, tuple(views), {"level": level})
    return out[0] if isinstance(out, (list, tuple)) else out


def usable(t: torch.Tensor) -> bool:
    """Whether these kernels can digest `t` (int64 leaves on a CUDA device, with torch's jiterator)."""
    return _LAUNCH is not None and t.device.type == "cuda" and t.numel() < 1 << 31
