"""The extension point of the attention skeleton: the abstract scoring hook, GRPE's named state,
and layers that say what runs when printed."""
from __future__ import annotations

import pytest

from dgl_graphtx.featurize import smiles_to_graphs
from dgl_graphtx.models import GradformerOptions, ModelConfig, MoireOptions, build_model
from dgl_graphtx.nn import GRPEAttention, ScoreTerms, StructureTerm
from dgl_graphtx.nn.grpe import GRPEState, JointClasses


def test_a_term_without_score_terms_cannot_be_built():
    class NoScores(StructureTerm):
        pass

    class HopBias(StructureTerm):
        def score_terms(self, graph, q, k, scale, state):
            return ScoreTerms(bias=graph.edata["spd"].to(q.dtype)[:, None])

    with pytest.raises(TypeError, match="score_terms"):
        NoScores()
    assert HopBias().adds_values is False


def test_grpe_state_is_named_and_indexes_the_present_classes():
    _, rel = smiles_to_graphs("CC(=O)O")
    prepared = GRPEAttention(8, 2, max_distance=3).structure.prepare(rel)
    assert isinstance(prepared, GRPEState) and isinstance(prepared.classes, JointClasses)
    state = prepared.classes
    assert state.edge_class.shape == (rel.num_edges(),)
    # every present joint class is used by some edge, and the edges' rows cover 0..C-1
    assert sorted(state.edge_class.unique().tolist()) == list(range(len(state.spatial_rows)))
    assert len(state.spatial_rows) == len(state.edge_rows)


def test_print_model_shows_what_runs():
    moire = ModelConfig(variant="moire", num_layers=1, hidden_dim=8, num_heads=2, readout="mean", virtual_node=False,
                        moire=MoireOptions(focus="cauchy", distance="spd", mode="reference"))
    text = str(build_model(moire))
    assert "focus='cauchy', distance='spd', mode='reference'" in text
    assert "embed_dim=8, num_heads=2, aggregation='auto'" in text
    gradformer = ModelConfig(variant="gradformer", num_layers=1, hidden_dim=8, num_heads=2, readout="mean",
                             virtual_node=False, gradformer=GradformerOptions(mode="reference", slope=0.2))
    assert "mode='reference', slope=0.2, learn_decay=False" in str(build_model(gradformer))
    assert "mode='paper', max_distance=5" in str(build_model(ModelConfig(variant="grpe", num_layers=1, hidden_dim=8, num_heads=2)))
    assert "GraphormerBias(max_distance=5" in str(build_model(ModelConfig(variant="graphormer", num_layers=1, hidden_dim=8, num_heads=2)))
