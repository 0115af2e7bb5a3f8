"""Any registered variant's attention as the GPS block's global attention (``architecture="gps"``):
the model builds, trains a step, and its blocks' attention equals the dense reference."""
from __future__ import annotations

import pytest
import torch

from attention_variants import D_MODEL, HEADS, VARIANTS, options, read_params, run_reference
from conftest_models import batch_of, dataset_for
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.models import VARIANT_NAMES, GPSModel, GPSOptions, GraphTransformer, ModelConfig, build_model
from dgl_graphtx.models.blocks import GPSBlock
from dgl_graphtx.relation_graph import RelationConfig

#: The first catalogue entry of each variant that reads no 3-D distances (the data has none).
ONE_PER_VARIANT = [next(v for v in VARIANTS if v.kind == name and v.distance != "dist") for name in VARIANT_NAMES]


def _gps_config(v, **overrides) -> ModelConfig:
    return ModelConfig(variant=v.kind, architecture="gps", num_layers=2, hidden_dim=D_MODEL, num_heads=HEADS,
                       readout="mean", virtual_node=False, attn_dropout=0.0, **options(v), **overrides)


@pytest.fixture(scope="module")
def batch():
    return batch_of(dataset_for(FeaturizerConfig(), RelationConfig("complete"), 0, 8))


@pytest.mark.parametrize("v", ONE_PER_VARIANT, ids=lambda v: v.id)
def test_any_variant_trains_in_gps_blocks_and_attends_as_the_dense_reference(v, batch):
    torch.manual_seed(0)
    model = build_model(_gps_config(v))
    assert type(model) is GPSModel and all(isinstance(block, GPSBlock) for block in model.blocks)
    assert type(model.blocks[0].attention) is type(build_model(ModelConfig(
        variant=v.kind, num_layers=1, hidden_dim=D_MODEL, num_heads=HEADS, readout="mean", virtual_node=False,
        architecture="transformer", **options(v))).blocks[0].attention)
    attention = model.blocks[0].attention
    before = [p.detach().clone() for p in attention.parameters()]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    loss = ((model(batch.graph, batch.relation_graph) - batch.labels)[batch.mask] ** 2).mean()
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in attention.parameters())  # the step reaches the global attention
    assert any(not torch.equal(p, b) for p, b in zip(attention.parameters(), before))
    # the trained global attention against the dense reference, in float64, on one molecule's relation graph
    layer = attention.double().eval()
    rel = dataset_for(FeaturizerConfig(), RelationConfig("complete"), 3, 4)[0][1]
    x = torch.randn(rel.num_nodes(), D_MODEL, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out, attn = layer(rel, x, get_attention=True)
    ref_out, ref_attn = run_reference(v, read_params(layer, v), x, rel)
    src, dst = (t.long() for t in rel.edges())
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=0)
    torch.testing.assert_close(attn, ref_attn[:, dst, src].T, atol=1e-6, rtol=0)


def test_the_gps_settings_apply_to_any_variant():
    config = _gps_config(ONE_PER_VARIANT[0], gps=GPSOptions(norm="layer", local_model="gatedgcn"))
    block = build_model(config).blocks[0]
    assert type(block.local).__name__ == "GatedGCNLayer" and isinstance(block.out_norm, torch.nn.LayerNorm)


def test_the_architecture_is_the_registry_entry_unless_the_config_chooses():
    assert type(build_model(ModelConfig(variant="grpe", num_layers=1, hidden_dim=8, num_heads=2))) is GraphTransformer
    gradformer = ModelConfig(variant="gradformer", architecture="transformer", num_layers=1, hidden_dim=8, num_heads=2)
    assert gradformer.model_architecture == "transformer" and type(build_model(gradformer)) is GraphTransformer
    with pytest.raises(ConfigError, match="GPS block uses no virtual node"):
        ModelConfig(variant="grpe", architecture="gps", virtual_node=True, readout="virtual")  # GRPE's preset reads the virtual node
    with pytest.raises(ConfigError, match="architecture must be one of"):
        ModelConfig(architecture="mpnn")


def test_old_gradformer_sections_load_with_their_gps_settings():
    old = {"variant": "gradformer", "readout": "mean", "virtual_node": False, "rwse_steps": 4,
           "gradformer": {"decay": 0.6, "norm": "layer", "local_model": "gatedgcn", "pe_gate": True}}
    config = ModelConfig.from_dict(old)
    assert config.gps == GPSOptions(norm="layer", local_model="gatedgcn", pe_gate=True) and config.gradformer.decay == 0.6
    assert ModelConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="give it once"):
        ModelConfig.from_dict({**old, "gps": {"local_model": "gine"}})
