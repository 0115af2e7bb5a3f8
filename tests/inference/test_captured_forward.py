"""Prediction passes recorded once per padded batch shape and replayed
(dgl_graphtx/inference/captured_forward.py). CUDA graphs need a GPU; on the CPU a recorder that
replays by running the pass again on the recorded inputs checks everything around the graphs: the
padding, the copies of each batch into the recorded inputs, the shapes and the fallbacks. The
reference is the same predictor run eagerly."""
from __future__ import annotations

import logging
from typing import Callable, List

import dgl
import numpy as np
import pandas as pd
import pytest
import torch

from conftest_models import freesolv_rows, seeded_model, tiny_preset
from dgl_graphtx.datasets.packed import PackedGraphs
from dgl_graphtx.inference import Predictor
from dgl_graphtx.inference.captured_forward import CapturedForward, prediction_shape

SMILES = list(freesolv_rows(0, 60)["smiles"]) + ["C1CC", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC(=O)O"]


def checkpoint(folder, model: str, **overrides):
    """``folder/m.pt``: a seeded model of ``model``'s default preset, shrunk (conftest_models.tiny_preset)."""
    from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
    preset = tiny_preset(model, **overrides)
    return save_checkpoint(folder / "m.pt", seeded_model(preset, seed=3), CheckpointMeta(preset.featurizer, preset.relation, ["y"]))


def rerun_recorder(replays: List[int]) -> Callable:
    """Records ``run`` by running it, leaving its output unset (a CUDA graph's recording runs
    nothing); a replay runs it again into the same output tensor."""
    def record(run):
        output = run().fill_(float("nan"))

        def replay():
            replays.append(1)
            output.copy_(run())
        return replay, output
    return record


def replaying(path, replays: List[int], **options) -> Predictor:
    predictor = Predictor(path, device="cpu", compute="tensors", batch_size=8, **options)
    predictor.captured = CapturedForward(predictor._predict_tensor, torch.device("cpu"), recorder=rerun_recorder(replays))
    return predictor


def assert_same_table(replayed: pd.DataFrame, eager: pd.DataFrame) -> None:
    numbers = [c for c in eager.columns if eager[c].dtype.kind == "f"]
    assert numbers and replayed.columns.tolist() == eager.columns.tolist()
    pd.testing.assert_frame_equal(replayed.drop(columns=numbers), eager.drop(columns=numbers))
    np.testing.assert_allclose(replayed[numbers].to_numpy(), eager[numbers].to_numpy(), rtol=0, atol=2e-5)


@pytest.mark.parametrize("model", ["gradformer", "grpe", "moire", "vanilla", "graphormer"])
def test_replayed_batches_predict_what_the_eager_ones_do(model, tmp_path):
    path = checkpoint(tmp_path, model)
    eager = Predictor(path, device="cpu", compute="tensors", batch_size=8).predict(SMILES)
    replays: List[int] = []
    predictor = replaying(path, replays)
    replayed = predictor.predict(SMILES)
    assert_same_table(replayed, eager)
    assert eager["error"].notna().sum() == 1  # C1CC
    recorded = [r for r in predictor.captured.recorded.values() if r is not None]
    assert len(replays) == 8 and 2 <= len(recorded) < 8  # 61 molecules in 8 batches, some of them of a recorded shape


def test_an_uncertainty_head_is_replayed_with_its_std(tmp_path):
    path = checkpoint(tmp_path, "gradformer", uncertainty_head="mve")
    eager = Predictor(path, device="cpu", compute="tensors", batch_size=8, uncertainty="mve").predict(SMILES)
    replays: List[int] = []
    replayed = replaying(path, replays, uncertainty="mve").predict(SMILES)
    assert "y_std" in eager.columns and replays
    assert_same_table(replayed, eager)


def test_shapes_beyond_the_bound_run_eagerly_and_say_so_once(tmp_path, caplog):
    path = checkpoint(tmp_path, "gradformer")
    eager = Predictor(path, device="cpu", compute="tensors", batch_size=8).predict(SMILES)
    replays: List[int] = []
    predictor = replaying(path, replays)
    predictor.captured.max_shapes = 1
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        replayed = predictor.predict(SMILES)
    assert_same_table(replayed, eager)
    assert sum(r is not None for r in predictor.captured.recorded.values()) == 1
    assert [r.getMessage() for r in caplog.records if "shapes recorded" in r.getMessage()] == [
        "1 batch shapes recorded for prediction; batches of other shapes run eagerly"]


def test_a_pass_that_cannot_be_recorded_runs_eagerly(tmp_path, caplog):
    path = checkpoint(tmp_path, "gradformer")
    eager = Predictor(path, device="cpu", compute="tensors", batch_size=8).predict(SMILES)
    predictor = Predictor(path, device="cpu", compute="tensors", batch_size=8)

    def refuse(run):
        raise RuntimeError("operation not permitted when stream is capturing\nmore")
    predictor.captured = CapturedForward(predictor._predict_tensor, torch.device("cpu"), recorder=refuse)
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        assert_same_table(predictor.predict(SMILES), eager)
    said = {r.getMessage() for r in caplog.records}
    assert said and all(m.endswith("it runs eagerly: operation not permitted when stream is capturing") for m in said)
    assert set(predictor.captured.recorded.values()) == {None}


def test_padded_shapes_round_up_sizes():
    def chain(atoms: int) -> dgl.DGLGraph:  # a path of ``atoms`` nodes, both directions
        src = torch.arange(atoms - 1)
        return dgl.graph((torch.cat([src, src + 1]), torch.cat([src + 1, src])), num_nodes=atoms)
    packed = PackedGraphs.from_graphs([chain(7), chain(8), chain(20)])
    assert prediction_shape(packed, [0]) == prediction_shape(packed, [0]).__class__(1, 8, 16)  # 7 atoms + 1 padding node
    assert (prediction_shape(packed, [0, 1]).atoms, prediction_shape(packed, [0, 1]).molecules) == (16, 2)
    assert prediction_shape(packed, [0, 1, 2]) == prediction_shape(packed, [2, 0, 1]) == prediction_shape(packed, [0]).__class__(4, 24, 48)


def test_only_a_cuda_device_records(tmp_path):
    path = checkpoint(tmp_path, "gradformer")
    assert Predictor(path, device="cpu", compute="tensors").captured is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_cuda_graphs_predict_what_the_eager_passes_do(tmp_path):
    path = checkpoint(tmp_path, "gradformer")
    eager = Predictor(path, device="cuda", batch_size=8, capture=False)
    captured = Predictor(path, device="cuda", batch_size=8)
    assert eager.captured is None and captured.captured is not None
    assert_same_table(captured.predict(SMILES), eager.predict(SMILES))
    assert any(r is not None for r in captured.captured.recorded.values())
    assert Predictor(path, device="cuda", uncertainty="mc_dropout").captured is None
