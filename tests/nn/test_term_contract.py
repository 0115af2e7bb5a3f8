"""The extension point of the attention skeleton: the abstract scoring hook, GRPE's named state,
and layers that say what runs when printed."""
from __future__ import annotations

import pytest

from dgl_graphtx.featurize import smiles_to_graphs
from dgl_graphtx.models import GradformerOptions, ModelConfig, MoireOptions, build_model
from dgl_graphtx.nn import GRPEAttention, ScoreTerms, StructureTerm
from dgl_graphtx.nn.grpe import PairClasses
from dgl_graphtx.nn.pair_classes import SpatialClasses


def test_a_term_without_score_terms_cannot_be_built():
    class NoScores(StructureTerm):
        pass

    class HopBias(StructureTerm):
        def score_terms(self, graph, q, k, scale, state):
            return ScoreTerms(bias=graph.edata["spd"].to(q.dtype)[:, None])

    with pytest.raises(TypeError, match="score_terms"):
        NoScores()
    assert HopBias().adds_values is False


def test_grpe_state_is_named_and_holds_each_edges_classes_and_rows():
    _, rel = smiles_to_graphs("CC(=O)O")
    term = GRPEAttention(8, 2, max_distance=3).structure
    state = term.prepare(rel)
    assert isinstance(state, PairClasses)
    e, n = rel.num_edges(), rel.num_nodes()
    assert state.spatial.tolist() == SpatialClasses(3)(rel.edata["spd"]).tolist()
    assert state.edge.tolist() == rel.edata["bond"].tolist()
    src, dst = (t.tolist() for t in rel.edges())
    c, spatial = term.num_classes, SpatialClasses(3).num_classes
    # each edge reads its query node's row of its spatial class and of its edge class (after the spatial ones)
    assert state.query_rows.tolist() == [i * c + s for i, s in zip(dst, state.spatial.tolist())] + [
        i * c + spatial + b for i, b in zip(dst, state.edge.tolist())]
    assert state.key_rows.tolist()[:e] == [j * c + s for j, s in zip(src, state.spatial.tolist())]  # paper: the key node j
    assert int(state.query_rows.max()) < n * c


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
