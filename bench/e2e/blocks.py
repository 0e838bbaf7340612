"""A transformer for the benchmarks: ``--models bench.e2e.blocks:transformer`` (ViT-style, image in,
classes out). torchvision's vit_b_16 keeps parameters outside leaf modules (class token,
position embedding, MultiheadAttention's in_proj_weight), which the emulated accelerator cannot
gate per module; this one keeps every parameter in a leaf module (Conv2d, Embedding, LayerNorm,
Linear), so ``--compute emulated`` replays it. 8 pre-norm blocks of width 512 (8 heads, MLP
2048), patch 8, mean-pooled tokens, a 1000-class head: 26.3 M parameters (105 MB).
"""

import torch
from torch import nn
from torch.nn import functional as F


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm2, self.fc1, self.fc2 = nn.LayerNorm(dim), nn.Linear(dim, mlp), nn.Linear(mlp, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Transformer(nn.Module):
    def __init__(self, dim=512, depth=8, heads=8, mlp=2048, patch=8, max_tokens=1024, num_classes=1000):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.pos = nn.Embedding(max_tokens, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, num_classes)

    def forward(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2)
        t = t + self.pos(torch.arange(t.shape[1], device=t.device))
        return self.head(self.norm(self.blocks(t)).mean(dim=1))


def transformer() -> nn.Module:
    return Transformer()
