"""The optimisation step reads nothing back from the device (checked on the CPU by the operations
it dispatches), for every preset, and decides on the device to skip a non-finite step."""
from __future__ import annotations

import pytest
import torch
from conftest_models import freesolv_rows

import dgl

from dgl_graphtx.datasets import MoleculeDataset, collate_molecule_tensors
from dgl_graphtx.models import build_model, get_preset
from dgl_graphtx.models.presets import PRESETS
from dgl_graphtx.nn.dense_blocks import BlockGeometry
from dgl_graphtx.testing import HostSyncError, OperationCounter, assert_no_host_sync
from dgl_graphtx.training.adamw import adamw
from dgl_graphtx.training.step_tally import StepTally
from dgl_graphtx.training.train_step import TrainStep
from dgl_graphtx.training.trainer import masked_loss

EVERY_PRESET = [(model, name) for model, names in sorted(PRESETS.items()) for name in sorted(names)]


def _batches(model: str, name: str, count: int = 2, size: int = 6, **overrides):
    preset = get_preset(model, name, num_layers=2, **overrides)
    frame = freesolv_rows(0, count * size)
    labels = torch.tensor(frame["expt"].tolist())[:, None].repeat(1, preset.model.num_tasks)
    if preset.model.task != "regression":
        labels = (labels > labels.median()).float()
    data = MoleculeDataset(list(frame["smiles"]), labels, featurizer=preset.featurizer, relation=preset.relation, progress=False)
    batches = [collate_molecule_tensors(data.__getitems__(list(range(i * size, (i + 1) * size)))) for i in range(count)]
    return preset, batches


def _step(preset, grad_clip: float = 0.0) -> TrainStep:
    torch.manual_seed(0)
    model = build_model(preset.model).train()
    optimizer = adamw([{"params": list(model.parameters())}], lr=1e-3, weight_decay=0.01, device="cpu")

    def loss(output, batch, rows):
        return masked_loss(preset.model.task, output[:, : batch.labels.shape[1]], batch.labels, batch.mask)

    return TrainStep(model, loss, list(model.parameters()), optimizer, grad_clip)


@pytest.mark.parametrize("model, name", EVERY_PRESET, ids=[f"{m}-{n}" for m, n in EVERY_PRESET])
def test_a_training_step_of_every_preset_reads_nothing_back(model, name):
    preset, (first, second) = _batches(model, name)
    step = _step(preset, grad_clip=1.0 if name == "molhiv" else 0.0)
    step(first)  # the first step makes the optimizer's state
    result = assert_no_host_sync(step, second)
    assert not result.skipped and torch.isfinite(result.loss)
    tally = StepTally("cpu", window=4)
    assert_no_host_sync(tally.add, result.loss, result.grad_norm, result.skipped, result.loss_not_finite, 6)


def test_the_guard_names_a_read_back_and_where_it_happened():
    graph = dgl.batch([dgl.graph(([0, 1], [1, 0])), dgl.graph(([0], [0]))])
    with pytest.raises(HostSyncError, match=r"_local_scalar_dense reads a value back from the device at nn/dense_blocks.py:\d+"):
        assert_no_host_sync(BlockGeometry.of, graph)  # a DGLGraph's blocks are checked where they are used
    with OperationCounter() as counter:
        torch.arange(4)[torch.tensor([True, False, True, False])]  # a boolean mask: its size depends on the data
        torch.ones(3).tolist()
    assert counter.syncs == {"index": 1, "tolist": 1}


def test_a_non_finite_step_is_skipped_on_the_device_and_the_next_one_taken():
    preset, (first, second) = _batches("gradformer", "default")
    step = _step(preset)
    step(first)
    weights = {k: v.clone() for k, v in step.module.state_dict().items() if "running" not in k and "batches" not in k}
    steps_taken = [s["step"].clone() for s in step.optimizer.state.values()]
    poisoned = second._replace(labels=second.labels * float("nan"), mask=torch.ones_like(second.mask))
    result = assert_no_host_sync(step, poisoned)
    assert result.skipped and result.loss_not_finite
    after = step.module.state_dict()
    assert all(torch.equal(after[k], v) for k, v in weights.items())  # no update, weight decay included
    assert all(torch.equal(s["step"], before) for s, before in zip(step.optimizer.state.values(), steps_taken))
    result = step(second)
    assert not result.skipped
    assert any(not torch.equal(after[k], v) for k, v in weights.items())


def test_a_non_finite_gradient_skips_the_step_with_the_loss_finite():
    preset, (first, second) = _batches("grpe", "tiny")
    step = _step(preset)
    step(first)
    handle = step.module.head.weight.register_hook(lambda grad: grad * float("inf"))
    result = assert_no_host_sync(step, second)
    handle.remove()
    assert result.skipped and not result.loss_not_finite and not torch.isfinite(result.grad_norm)


@pytest.mark.parametrize("model, name", [("gradformer", "molhiv"), ("grpe", "tiny"), ("moire", "2d")], ids=["gradformer-molhiv", "grpe-tiny", "moire-2d"])
def test_the_step_traces_as_one_graph_with_the_gradients_of_the_eager_step(model, name):
    """``torch.compile(fullgraph=True, dynamic=False)`` of the forward and loss: one graph (any
    break would raise), and in float64 the same loss and gradients as eager (AOTAutograd traces
    the backward; the ``aot_eager`` backend runs the traced graphs without generating code)."""
    preset, (batch, _) = _batches(model, name, dropout=0.0, attn_dropout=0.0)
    torch.manual_seed(0)
    net = build_model(preset.model).double().train()
    as_double = {k: v.double() for k, v in batch.graph.ndata.items() if v.is_floating_point()}
    batch.graph.ndata.update(as_double)

    def loss(graph, relation_graph, labels, mask):
        return masked_loss(preset.model.task, net(graph, relation_graph)[:, : labels.shape[1]], labels.double(), mask)

    def gradients(fn):
        net.zero_grad()
        value = fn(batch.graph, batch.relation_graph, batch.labels, batch.mask)
        value.backward()
        return [value.detach()] + [p.grad.clone() for p in net.parameters() if p.grad is not None]

    eager = gradients(loss)
    torch._dynamo.reset()
    traced = gradients(torch.compile(loss, fullgraph=True, dynamic=False, backend="aot_eager"))
    assert len(traced) == len(eager)
    for got, expected in zip(traced, eager):
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
