"""Convolutional image models defined here (torchvision is not a dependency): a small
MNIST CNN and ResNet-18, with seeded random weights."""

from __future__ import annotations

from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


def matmul_flops(module, inputs: tuple) -> float:
    """FLOPs of the Conv2d and Linear layers of one forward call (2 per multiply-add),
    counted from the shapes hooks see, so the figure follows any input size."""
    import torch

    total = 0.0

    def conv(mod, args, out):
        nonlocal total
        per_output = mod.in_channels // mod.groups * mod.kernel_size[0] * mod.kernel_size[1]
        total += 2.0 * out.numel() * per_output

    def linear(mod, args, out):
        nonlocal total
        total += 2.0 * out.numel() * mod.in_features

    hooks = []
    for sub in module.modules():
        if isinstance(sub, torch.nn.Conv2d):
            hooks.append(sub.register_forward_hook(conv))
        elif isinstance(sub, torch.nn.Linear):
            hooks.append(sub.register_forward_hook(linear))
    try:
        with torch.no_grad():
            module(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return total


def _mnist_net():
    import torch
    from torch import nn

    class MnistNet(nn.Module):
        """The CNN of PyTorch's MNIST example: two convs, max-pool, two linears."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = torch.relu(self.conv1(x))
            x = torch.relu(self.conv2(x))
            x = torch.flatten(nn.functional.max_pool2d(x, 2), 1)
            x = torch.relu(self.fc1(x))
            return torch.log_softmax(self.fc2(x), dim=1)

    return MnistNet()


@benchmark_model(
    default_shape=(1,), shape_doc="[batch] of 1x28x28 images",
    min_pcc={"f32": 0.9999, "f16": 0.999, "bf16": 0.99},
)
def mnist(config: str, dtype: str, layers: int | None, shape):
    """Small CNN for 28x28 digits (conv, conv, max-pool, linear, linear, log-softmax)."""
    import torch

    (batch,) = shape
    gen = seeded()
    module = _mnist_net().eval()
    x = torch.randn(batch, 1, 28, 28, generator=gen)
    return finish(module, (x,), dtype, flops=matmul_flops(module, (x,)))


def _resnet18():
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + identity)

    class ResNet18(nn.Module):
        """He et al. 2015, 18 layers: the layout of torchvision's resnet18."""

        def __init__(self, classes: int = 1000):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            stages, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                stages.append(nn.Sequential(BasicBlock(cin, cout, stride),
                                            BasicBlock(cout, cout, 1)))
                cin = cout
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))

    return ResNet18()


def _randomize_batchnorm(module, gen) -> None:
    """Fresh BatchNorm has mean 0 / var 1 / weight 1 / bias 0, which makes it an identity in
    eval mode and hides its arithmetic from the accuracy check; trained-like statistics
    keep it a real scale and shift."""
    import torch

    for sub in module.modules():
        if isinstance(sub, torch.nn.BatchNorm2d):
            n = sub.num_features
            sub.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
            sub.running_var.copy_(0.5 + torch.rand(n, generator=gen))
            with torch.no_grad():
                sub.weight.copy_(0.5 + torch.rand(n, generator=gen))
                sub.bias.copy_(0.1 * torch.randn(n, generator=gen))


@benchmark_model(
    default_shape=(1, 224, 224), shape_doc="[batch, height, width] of RGB images",
    min_pcc={"f32": 0.999, "f16": 0.99, "bf16": 0.98},
)
def resnet18(config: str, dtype: str, layers: int | None, shape):
    """ResNet-18 image classifier (BasicBlock x [2, 2, 2, 2], batch norm in eval mode)."""
    import torch

    batch, height, width = shape
    gen = seeded()
    module = _resnet18().eval()
    _randomize_batchnorm(module, gen)
    x = torch.randn(batch, 3, height, width, generator=gen)
    return finish(module, (x,), dtype, flops=matmul_flops(module, (x,)))
