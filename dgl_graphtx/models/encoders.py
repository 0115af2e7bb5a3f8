"""Input encoders: categorical features are embedded and summed, dense features projected."""
from __future__ import annotations

from typing import Sequence, cast

import torch
from torch import nn

from ..errors import ConfigError
from ..nn import lean


class FeatureEncoder(nn.Module):
    """Encode ``[N, F]`` node or edge features into ``[N, dim]``.

    With ``categorical=True`` each of the ``F`` int64 columns has its own embedding table (sizes
    from ``dims``) and the embeddings are summed (GRPE / OGB style); otherwise ``dims == (F,)``
    and a Linear layer projects float features. A categorical value outside its table (damaged
    featurized data, or data featurized with other settings) is a :class:`ConfigError` naming the
    ``kind`` of feature, its column and value.

    Example:
        >>> enc = FeatureEncoder((5, 3), 8, categorical=True)
        >>> enc(torch.tensor([[4, 2], [0, 0]])).shape
        torch.Size([2, 8])
    """

    sizes: torch.Tensor  # buffers of categorical encoders: each table's rows, and where it starts among all
    offsets: torch.Tensor

    def __init__(self, dims: Sequence[int], dim: int, categorical: bool, kind: str = "atom") -> None:
        super().__init__()
        self.categorical = categorical
        self.kind = kind
        if categorical:
            self.embeddings = nn.ModuleList(nn.Embedding(int(size), dim) for size in dims)
            sizes = [int(size) for size in dims]
            self.register_buffer("sizes", torch.tensor(sizes), persistent=False)
            self.register_buffer("offsets", torch.tensor([sum(sizes[:col]) for col in range(len(sizes))]), persistent=False)
            self.rows = sum(sizes)  # of all tables together
        else:
            if len(dims) != 1:
                raise ValueError(f"dense features need dims=(width,), got {tuple(dims)}")
            self.linear = lean.Linear(int(dims[0]), dim)

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        if not self.categorical:
            return self.linear(feat)
        if feat.dim() != 2 or feat.shape[1] != len(self.embeddings):
            raise ValueError(f"expected [N, {len(self.embeddings)}] categorical features, got {tuple(feat.shape)}")
        # all tables as one lookup; a value outside its column's table (no check here: it would
        # wait for the device; check() is the loaders' on the host) points past the last row
        inside = (feat >= 0) & (feat < self.sizes)
        rows = torch.where(inside, feat + self.offsets, self.rows)
        table = torch.cat([cast(nn.Embedding, embedding).weight for embedding in self.embeddings])
        try:
            return nn.functional.embedding(rows, table).sum(1)
        except IndexError:  # found by the CPU kernels: say which column and value
            self.check(feat)
            raise

    def check(self, feat: torch.Tensor) -> None:
        """Raise :class:`ConfigError` naming the column and value if a categorical value of ``feat``
        lies outside its table: one clear error instead of an ``IndexError`` (or a CUDA assert)
        deep in an embedding. Run it on the host before a batch goes to a GPU.

        Example:
            >>> FeatureEncoder((5, 3), 8, categorical=True).check(torch.tensor([[4, 2]]))
        """
        if not self.categorical:
            return
        sizes = self.sizes.to(feat.device)
        outside = (feat < 0) | (feat >= sizes)
        if not bool(outside.any()):
            return
        row, col = (int(i) for i in torch.nonzero(outside)[0])
        raise ConfigError(f"{self.kind} feature {col} holds {int(feat[row, col])}, outside the {int(sizes[col])} values "
                          "the model's embedding knows: the featurized molecules are damaged or were featurized with other "
                          "settings; featurize them again (delete the store or the dataset cache, or rerun "
                          "'dgl-graphtx featurize')")
