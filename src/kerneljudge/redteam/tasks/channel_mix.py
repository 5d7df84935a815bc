"""KernelBench-style: a pointwise (1 x 1) convolution that mixes channels, then a sigmoid. Its sizes are
module-level integers and it declares no shape family; `out_channels` reaches the model only through
get_init_inputs (it changes the weight's and the output's shape, no input's), so a judge that varies only
input shapes never varies it. The public 128 output channels are a power of two and a multiple of 32 and 64."""
import torch
import torch.nn as nn

batch_size = 4
in_channels = 24
length = 80
out_channels = 128


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.mix = nn.Conv1d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return torch.sigmoid(self.mix(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels]
