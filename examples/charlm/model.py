"""The model of train.py, in a module of its own as nanoGPT's model.py is."""

import torch
import torch.nn as nn
from torch.nn import functional as F


class CharModel(nn.Module):
    """Each character's embedding, with the mean of the ones before it, predicts the next."""

    def __init__(self, vocab: int, n_embd: int, hidden: int, dropout: float):
        super().__init__()
        self.embed = nn.Embedding(vocab, n_embd)
        layers = [nn.Linear(2 * n_embd, hidden), nn.GELU(), nn.Dropout(dropout)] if hidden else []
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(hidden or 2 * n_embd, vocab)

    def forward(self, idx, targets):
        e = self.embed(idx)
        context = torch.cumsum(e, dim=1) / torch.arange(1, idx.shape[1] + 1).view(1, -1, 1)
        logits = self.head(self.body(torch.cat([e, context], dim=-1)))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
