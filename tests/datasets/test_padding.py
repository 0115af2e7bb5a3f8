"""Padded batches (fixed shapes per size bucket) give the real molecules what the unpadded batch
gives them: outputs, loss, gradients and BatchNorm running statistics, for every kind of model."""
from __future__ import annotations

import pytest
import torch
from conftest_models import freesolv_rows

from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.datasets.collate import MoleculeBatch
from dgl_graphtx.datasets.padding import PaddedShape, PaddingOverflow, pad_batch, real_molecules
from dgl_graphtx.models import GPSOptions, GradformerOptions, build_model, get_preset
from dgl_graphtx.nn.graph_tensors import GraphTensors
from dgl_graphtx.training.trainer import masked_loss

#: Every readout, architecture and structure term: GPS with GatedGCN and its PE gate, BatchNorms,
#: normed random-walk encodings and mean readout; GRPE with virtual nodes read out; MoireGT 2-D
#: with max readout; MoireGT 3-D energy (coordinates, radial terms, atomwise sums, atom references);
#: the baselines.
CASES = {
    "gradformer-molhiv": ("gradformer", "molhiv", {}),
    "gradformer-gine-sum": ("gradformer", "zinc", {}),
    "grpe-tiny": ("grpe", "tiny", {}),
    "grpe-reference": ("grpe", "standard", {}),
    "moire-2d": ("moire", "2d", {}),
    "moire-3d-energy": ("moire", "3d-energy", {}),
    "graphormer": ("graphormer", "tiny", {}),
    "vanilla": ("vanilla", "tiny", {}),
    "gradformer-decay": ("gradformer", "default", {"gradformer": GradformerOptions(mode="decay")}),
    "gradformer-gatedgcn-layernorm": ("gradformer", "default", {"gps": GPSOptions(local_model="gatedgcn", norm="layer")}),
}
SIZE = 7


def _data(model: str, name: str, overrides):
    preset = get_preset(model, name, num_layers=2, dropout=0.0, attn_dropout=0.0, **overrides)
    frame = freesolv_rows(0, SIZE)
    labels = torch.tensor(frame["expt"].tolist())[:, None].repeat(1, preset.model.num_tasks)
    if preset.model.task != "regression":
        labels = (labels > labels.median()).float()
    labels[2, 0] = float("nan")  # a missing label stays missing
    data = MoleculeDataset(list(frame["smiles"]), labels, featurizer=preset.featurizer, relation=preset.relation, progress=False)
    return preset, data.__getitems__(list(range(SIZE)))


def _shape(batch: MoleculeBatch, molecules: int = SIZE + 3) -> PaddedShape:
    atoms, bonds = int(batch.graph.batch_num_nodes().max()), int(batch.graph.batch_num_edges().max())
    return PaddedShape(molecules=molecules, atoms=atoms + 3, bonds=bonds + 5)


def _run(net, batch: MoleculeBatch, task: str, real: int):
    net.zero_grad()
    out = net(batch.graph, batch.relation_graph)
    loss = masked_loss(task, out[:, : batch.labels.shape[1]], batch.labels, batch.mask)
    loss.backward()
    stats = {k: v.clone() for k, v in net.state_dict().items() if "running" in k}
    return out[:real].detach(), loss.detach(), [p.grad.clone() for p in net.parameters() if p.grad is not None], stats


@pytest.mark.parametrize("case", list(CASES))
def test_a_padded_batch_equals_the_unpadded_one(case):
    model, name, overrides = CASES[case]
    preset, batch = _data(model, name, overrides)
    padded = pad_batch(batch, _shape(batch))
    assert real_molecules(padded) == SIZE and padded.batch_size == SIZE + 3
    torch.manual_seed(0)
    net = build_model(preset.model).double().train()
    initial = {k: v.clone() for k, v in net.state_dict().items()}
    reference = _run(net, batch.as_tensors(), preset.model.task, SIZE)
    net.load_state_dict(initial)
    got = _run(net, padded, preset.model.task, SIZE)
    torch.testing.assert_close(got[0], reference[0], rtol=0, atol=1e-9)
    torch.testing.assert_close(got[1], reference[1], rtol=0, atol=1e-9)
    assert len(got[2]) == len(reference[2])
    for a, b in zip(got[2], reference[2]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-9)
    for key in reference[3]:
        torch.testing.assert_close(got[3][key], reference[3][key], rtol=0, atol=1e-9)
    net.eval()
    with torch.no_grad():
        torch.testing.assert_close(net(padded.graph, padded.relation_graph)[:SIZE],
                                   net(batch.graph, batch.relation_graph), rtol=0, atol=1e-9)


def test_every_batch_of_a_shape_has_the_same_tensor_shapes():
    preset, batch = _data("grpe", "tiny", {})
    shape = _shape(batch)
    small = MoleculeBatch(*[x for x in MoleculeDataset(["C", "CO"], [[1.0], [2.0]], featurizer=preset.featurizer,
                                                       relation=preset.relation, progress=False).__getitems__([0, 1])])

    def shapes(b: MoleculeBatch):
        graphs = [b.graph, b.relation_graph]
        out = [(g.num_nodes(), g.num_edges(), tuple(g.batch_num_nodes().shape)) for g in graphs]
        out += [(k, tuple(v.shape)) for g in graphs for k, v in sorted({**g.ndata, **g.edata}.items())]
        out.append(tuple(b.relation_graph.pair_codes.spd.shape))
        return out + [tuple(b.labels.shape)]

    assert shapes(pad_batch(batch, shape)) == shapes(pad_batch(small, shape))
    geometry = pad_batch(small, shape).relation_graph.block_geometry
    assert (geometry.num_graphs, geometry.size, geometry.has_empty_rows) == (shape.molecules, shape.atoms + 1, True)


def test_a_batch_that_does_not_fit_its_shape_is_refused():
    _, batch = _data("gradformer", "default", {})
    atoms = int(batch.graph.batch_num_nodes().max())
    with pytest.raises(PaddingOverflow, match="does not fit"):
        pad_batch(batch, PaddedShape(molecules=SIZE, atoms=atoms, bonds=64))  # no padding node left in the largest slot
    with pytest.raises(PaddingOverflow, match="does not fit"):
        pad_batch(batch, PaddedShape(molecules=SIZE - 1, atoms=atoms + 1, bonds=64))
    with pytest.raises(PaddingOverflow, match="combinations"):
        pad_batch(batch, PaddedShape(molecules=SIZE, atoms=atoms + 1, bonds=64, pair_codes=2))
    with pytest.raises(TypeError, match="DGLGraphs"):
        pad_batch(batch.as_tensors(), PaddedShape(molecules=SIZE, atoms=atoms + 1, bonds=64))
    assert isinstance(pad_batch(batch, PaddedShape(SIZE, atoms + 1, 64)).graph, GraphTensors)
