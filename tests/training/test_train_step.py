"""The optimisation step reads nothing back from the device (checked on the CPU by the operations
it dispatches), for every preset, and decides on the device to skip a non-finite step."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from conftest_models import freesolv_rows

import dgl

from dgl_graphtx.datasets import MoleculeBatch, MoleculeDataset, collate_molecule_tensors
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.datasets.padding import PaddedShape, pad_batch, real_molecules
from dgl_graphtx.models import build_model, get_preset
from dgl_graphtx.models.presets import PRESETS
from dgl_graphtx.nn.dense_blocks import BlockGeometry
from dgl_graphtx.testing import HostSyncError, OperationCounter, assert_no_host_sync
from dgl_graphtx.training.adamw import adamw, has_fused_adamw
from dgl_graphtx.training.fast_steps import COMPILES_THE_STEP, CompiledStep, resolve_step_mode
from dgl_graphtx.training.step_tally import StepTally
from dgl_graphtx.training.train_step import TrainStep
from dgl_graphtx.training import TrainConfig, Trainer
from dgl_graphtx.training import trainer as trainer_module
from dgl_graphtx.training.trainer import masked_loss

#: The fused AdamW decides a skip on the device; torch before 2.4 has none for the CPU and reads the
#: decision (on CUDA every supported torch has the fused kernel).
DECIDED_ON_THE_DEVICE = pytest.mark.skipif(not has_fused_adamw("cpu"), reason="no fused CPU AdamW before torch 2.4")
COMPILES = pytest.mark.skipif(not COMPILES_THE_STEP, reason="torch.compile of the whole step needs torch 2.6 or newer")


def _guarded(step, batch):
    """``step(batch)`` under the read-back guard where the fused AdamW decides on the device."""
    return assert_no_host_sync(step, batch) if has_fused_adamw("cpu") else step(batch)


EVERY_PRESET = [(model, name) for model, names in sorted(PRESETS.items()) for name in sorted(names)]


def _raw_batches(model: str, name: str, count: int = 2, size: int = 6, **overrides):
    preset = get_preset(model, name, num_layers=2, **overrides)
    frame = freesolv_rows(0, count * size)
    labels = torch.tensor(frame["expt"].tolist())[:, None].repeat(1, preset.model.num_tasks)
    if preset.model.task != "regression":
        labels = (labels > labels.median()).float()
    data = MoleculeDataset(list(frame["smiles"]), labels, featurizer=preset.featurizer, relation=preset.relation, progress=False)
    return [data.__getitems__(list(range(i * size, (i + 1) * size))) for i in range(count)]


def _batches(model: str, name: str, count: int = 2, size: int = 6, **overrides):
    preset = get_preset(model, name, num_layers=2, **overrides)
    return preset, [collate_molecule_tensors(b) for b in _raw_batches(model, name, count, size, **overrides)]


def _double(batch: MoleculeBatch) -> MoleculeBatch:
    return batch.map_tensors(lambda t: t.double() if t.is_floating_point() else t)


def _step(preset, grad_clip: float = 0.0) -> TrainStep:
    torch.manual_seed(0)
    model = build_model(preset.model).train()
    optimizer = adamw([{"params": list(model.parameters())}], lr=1e-3, weight_decay=0.01, device="cpu")

    def loss(output, batch, rows):
        return masked_loss(preset.model.task, output[:, : batch.labels.shape[1]], batch.labels, batch.mask)

    return TrainStep(model, loss, list(model.parameters()), optimizer, grad_clip)


@DECIDED_ON_THE_DEVICE
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
    result = _guarded(step, poisoned)
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
    result = _guarded(step, second)
    handle.remove()
    assert result.skipped and not result.loss_not_finite and not torch.isfinite(result.grad_norm)


@COMPILES
@pytest.mark.parametrize("model, name", [("gradformer", "molhiv"), ("grpe", "tiny"), ("moire", "2d")],
                         ids=["gradformer-molhiv", "grpe-tiny", "moire-2d"])
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


@COMPILES
def test_a_compiled_step_on_padded_batches_takes_the_eager_steps_path():
    """CompiledStep (the forward and loss traced once per padded shape) trains like the eager step:
    the same losses and weights over steps of two buckets (aot_eager runs the traced graphs op by
    op, float64); an unpadded batch takes the eager step itself."""
    preset, (first, second) = _batches("gradformer", "molhiv", dropout=0.0, attn_dropout=0.0)
    shapes = [PaddedShape(8, 30, 70), PaddedShape(8, 40, 90)]
    raw = [MoleculeBatch(*b) for b in _raw_batches("gradformer", "molhiv", dropout=0.0, attn_dropout=0.0)]
    padded = [pad_batch(b, shape) for b, shape in zip(raw, shapes)]

    def trained(make_step, batches):
        step = _step(preset)
        step.module.double()
        run = make_step(step)
        losses = [float(run(_double(b)).loss) for b in batches]
        return losses, [p.detach().clone() for p in step.module.parameters()]

    eager = trained(lambda s: s, padded * 2)
    torch._dynamo.reset()
    compiled = trained(lambda s: CompiledStep(s, backend="aot_eager"), padded * 2)
    torch.testing.assert_close(compiled[0], eager[0], rtol=0, atol=1e-10)
    for a, b in zip(compiled[1], eager[1]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    step = CompiledStep(_step(preset), backend="aot_eager")
    step(first)  # unpadded: no compilation
    assert step.shapes == {}


@COMPILES
def test_a_trainer_with_compiled_steps_trains_on_padded_size_buckets(monkeypatch):
    """step_mode='compiled': batches from size buckets padded to their shapes (one compiled graph
    per shape), every molecule trained on once per epoch, the epoch's mean loss over real molecules."""
    compiled = []

    def traced(step):
        compiled.append(CompiledStep(step, backend="aot_eager"))
        return compiled[-1]

    monkeypatch.setattr(trainer_module, "CompiledStep", traced)
    preset = get_preset("grpe", "tiny", num_layers=1, hidden_dim=16, num_heads=2)
    frame = freesolv_rows(0, 40)
    data = MoleculeDataset(list(frame["smiles"]), torch.tensor(frame["expt"].tolist())[:, None], featurizer=preset.featurizer,
                           relation=preset.relation, progress=False)
    config = TrainConfig(epochs=2, batch_size=8, progress=False, device="cpu", step_mode="compiled", size_buckets=3)
    result = Trainer(build_model(preset.model), config).fit(data, data)
    assert np.isfinite(result.history["train_loss"]).all() and np.isfinite(result.history["valid_rmse"]).all()
    assert 1 <= len(compiled[0].shapes) <= 3  # one compiled graph per bucket that had a batch
    seen = []
    loader = Trainer(build_model(preset.model), config).loader(data, shuffle=True, padded=True)
    for batch in loader:
        seen.append(real_molecules(batch))
        assert batch.graph.slot_size and batch.batch_size == 8
    assert seen == [len(batch) for batch in loader.batch_sampler] and min(seen) > 1  # BatchNorm needs two molecules
    assert 40 - len(loader.batch_sampler.buckets.upper) <= sum(seen) <= 40  # a bucket's last single molecule waits


@COMPILES
def test_a_trainer_with_its_own_loss_is_refused_padded_steps():
    """A subclass that changes the loss (as masked-atom pretraining does) may read what padding adds:
    the padded step modes are refused for it, naming the way out."""

    class OwnLoss(Trainer):
        def batch_loss(self, output, batch, rows=None):
            return output.square().mean()

    preset = get_preset("grpe", "tiny", num_layers=1, hidden_dim=16, num_heads=2)
    data = MoleculeDataset(list(freesolv_rows(0, 8)["smiles"]), torch.zeros(8, 1), featurizer=preset.featurizer,
                           relation=preset.relation, progress=False)
    config = TrainConfig(epochs=1, batch_size=4, progress=False, device="cpu", step_mode="compiled")
    with pytest.raises(ConfigError, match="OwnLoss's own loss or module .* use step_mode 'eager'"):
        OwnLoss(build_model(preset.model), config).fit(data)


@pytest.mark.skipif(COMPILES_THE_STEP, reason="this torch compiles the step")
def test_a_compiled_step_on_a_torch_that_cannot_compile_it_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=f"needs torch 2.6 or newer.*{re.escape(torch.__version__)}.*'eager'"):
        resolve_step_mode("compiled", torch.device("cpu"))
