"""Reference: fp32 matmul A @ B with A (128, 4096) and B (4096, 128), a long K=4096 reduction."""
import torch
import torch.nn as nn

M = 128
K = 4096
N = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    A = torch.randn(M, K, dtype=torch.float32)
    B = torch.randn(K, N, dtype=torch.float32)
    return [A, B]


def get_init_inputs():
    return []
