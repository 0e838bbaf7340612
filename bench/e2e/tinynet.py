"""A tiny CNN for smoke tests: ``--models bench.e2e.tinynet:tiny``.
Ten classes: run it with ``--num-classes 10``."""

from torch import nn


def tiny() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
        nn.Flatten(), nn.Linear(32 * 16, 256), nn.ReLU(), nn.Linear(256, 10))
