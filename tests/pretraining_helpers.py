"""What the pretraining tests share: an interruption injected into a run, and the check that two
runs ended with the same backbone weights."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import pytest
import torch

from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.runs.pretraining import MaskedDescriptorTrainer


@contextlib.contextmanager
def interrupted_at_epoch(monkeypatch: pytest.MonkeyPatch, epoch: int) -> Iterator[None]:
    """Run the ``with`` block's pretraining until it fails at the end of ``epoch`` (before that
    epoch's checkpoints are written), and expect that failure."""
    original = MaskedDescriptorTrainer._check_weights

    def fail_at_epoch(self, at):
        if at == epoch:
            raise RuntimeError("injected interruption")
        original(self, at)

    with monkeypatch.context() as patch:
        patch.setattr(MaskedDescriptorTrainer, "_check_weights", fail_at_epoch)
        with pytest.raises(RuntimeError, match="injected"):
            yield


def assert_same_backbone(run: Path, reference: Path) -> None:
    """The ``backbone.pt`` of two pretraining folders hold the same keys and bit-identical weights."""
    got, expected = (load_checkpoint(folder / "backbone.pt").model.state_dict() for folder in (run, reference))
    assert got.keys() == expected.keys()
    for key in expected:
        assert torch.equal(got[key], expected[key]), key
