"""A character-level transformer of a few thousand parameters, and the text it reads.

Shared by train.py and evaluate.py. One attention block (two heads, width 16), learned
positions, a causal mask; kept in float64 so the sum an all-reduce forms does not depend
on how DistributedDataParallel lays out its gradient buckets (a resumed run then ends
with the same loss as an uninterrupted one, digit for digit).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

UNKNOWN = 0
"""Index of a character the training corpus does not have."""


def read_text(folder: Path) -> str:
    """Every `*.txt` of a dataset folder, in name order."""
    return "".join(path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.txt")))


def vocabulary(text: str) -> list[str]:
    """The corpus's characters in code-point order; index i + 1 is character i."""
    return sorted(set(text))


def encode(text: str, vocab: list[str]) -> torch.Tensor:
    index = {character: position + 1 for position, character in enumerate(vocab)}
    return torch.tensor([index.get(character, UNKNOWN) for character in text], dtype=torch.long)


class TinyTransformer(nn.Module):
    def __init__(self, vocab_size: int, context: int, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.context = context
        self.token = nn.Embedding(vocab_size, width)
        self.position = nn.Embedding(context, width)
        self.attention_norm = nn.LayerNorm(width)
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp_norm = nn.LayerNorm(width)
        hidden = 2 * width
        self.mlp = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))
        self.out_norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size)
        causal = torch.triu(torch.ones(context, context, dtype=torch.bool), diagonal=1)
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        positions = torch.arange(length, device=tokens.device)
        x = self.token(tokens) + self.position(positions)
        h = self.attention_norm(x)
        attended, _ = self.attention(
            h, h, h, attn_mask=self.causal[:length, :length], need_weights=False
        )
        x = x + attended
        x = x + self.mlp(self.mlp_norm(x))
        return self.head(self.out_norm(x))  # type: ignore[no-any-return]


def build_model(vocab: list[str], context: int, seed: int) -> TinyTransformer:
    """The model every rank starts from (the same seed everywhere), in float64."""
    torch.manual_seed(seed)
    return TinyTransformer(len(vocab) + 1, context).double()


def parameter_count(model: nn.Module) -> int:
    return sum(parameter.numel() for parameter in model.parameters())
