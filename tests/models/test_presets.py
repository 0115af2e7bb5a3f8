"""Paper presets: the recipes carry the papers' / authors' numbers, parameter counts agree with
closed-form counts of our architecture and of the official GRPE code, every recipe trains one
batch at small size, and the ``presets`` / ``train`` commands use them."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest_models import dataset_for, freesolv_rows, tiny_preset
from torch.utils.data import Subset

from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize.ogb_features import OGB_ATOM_FEATURE_DIMS
from dgl_graphtx.models import PRESETS, TrainRecipe, build_model, count_parameters, get_preset, summarize_presets
from dgl_graphtx.training import Trainer, TrainConfig
from cli_runner import run_cli

EVERY_PRESET = [(model, name) for model, names in PRESETS.items() for name in names]


# --------------------------------------------------------------------------------------------
# the recipes hold the numbers of their sources
# --------------------------------------------------------------------------------------------
def test_gradformer_molhiv_is_the_authors_run_hiv_script():
    p = get_preset("gradformer", "molhiv", task="classification")
    m, g, t = p.model, p.model.gradformer, p.train
    assert (m.num_layers, m.hidden_dim, m.num_heads, m.dropout, m.rwse_steps) == (10, 64, 4, 0.05, 16)
    assert (m.gps.local_model, m.gps.pe_gate, g.decay, g.init_start, g.mode, g.slope) == ("gatedgcn", True, 0.7, 5.0, "reference", 0.2)
    assert (t.lr, t.batch_size, t.epochs, t.warmup_epochs) == (1e-4, 32, 100, 5)
    assert p.featurizer.rwse_steps == 16 and m.rwse_norm and m.task == "classification"


@pytest.mark.parametrize("name,slope,decay,start,local", [
    ("zinc", 0.1, 0.6, 2.0, "gine"), ("nci1", 0.0, 0.6, 5.0, "gine"), ("cluster", 0.1, 0.3, 0.0, "gatedgcn"),
])
def test_gradformer_script_recipes(name, slope, decay, start, local):
    m = get_preset("gradformer", name).model
    g = m.gradformer
    assert (g.slope, g.decay, g.init_start, m.gps.local_model, m.gps.pe_gate) == (slope, decay, start, local, False)


@pytest.mark.parametrize("name,layers,dim,heads,lr,distance", [
    ("qm9", 13, 256, 32, 5e-4, "dist"), ("pcqm4mv2", 8, 512, 16, 2e-4, "dist"), ("mnist", 5, 256, 32, 5e-4, "spd"),
])
def test_moire_presets_are_paper_table_1(name, layers, dim, heads, lr, distance):
    p = get_preset("moire", name)
    assert (p.model.num_layers, p.model.hidden_dim, p.model.num_heads, p.train.lr) == (layers, dim, heads, lr)
    assert p.model.moire.distance == distance and p.featurizer.needs_coordinates == (distance == "dist")


@pytest.mark.parametrize("name,size", [
    ("tiny", (4, 64, 8)), ("small", (12, 80, 8)), ("standard", (12, 768, 32)), ("large", (18, 1024, 32)),
])
def test_grpe_sizes_and_linear_schedule(name, size):
    p = get_preset("grpe", name)
    assert (p.model.num_layers, p.model.hidden_dim, p.model.num_heads) == size
    assert p.model.feedforward_dim == p.model.hidden_dim  # paper Table 1: FFN dim = hidden dim
    assert p.train.schedule == "linear" and p.train.lr == 2e-4
    assert p.train.lr * p.train.final_lr_ratio == pytest.approx(1e-9)


def test_every_preset_says_where_it_comes_from():
    for model, name in EVERY_PRESET:
        info = get_preset(model, name).info
        assert info.paper and info.dataset and info.source, (model, name)


def test_train_recipe_mirrors_train_config():
    recipe_fields = {f.name: f.default for f in dataclasses.fields(TrainRecipe)}
    config_fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    assert {k: config_fields[k] for k in recipe_fields} == recipe_fields
    cfg = TrainConfig.from_recipe(get_preset("grpe", "small").train, epochs=2, seed=7)
    assert (cfg.epochs, cfg.seed, cfg.batch_size, cfg.weight_decay) == (2, 7, 256, 1e-3)
    with pytest.raises(ConfigError, match="schedule"):
        TrainConfig.from_recipe(TrainRecipe(schedule="step"))


# --------------------------------------------------------------------------------------------
# parameter counts: meta-device builds against closed forms
# --------------------------------------------------------------------------------------------
def _grpe_layers(layers: int, d: int) -> int:
    """Pre-LN block: 2 LayerNorms, q/k/v/out projections, FFN d -> d -> d (paper Table 1)."""
    return layers * (2 * 2 * d + 4 * (d * d + d) + 2 * (d * d + d))


def _ours_grpe(layers: int, d: int) -> int:
    atom_rows = sum(OGB_ATOM_FEATURE_DIMS)
    spatial, edge = 5 + 4, 5 * 6 * 2 + 3  # hops 0..L, FAR, UNREACHABLE, VIRTUAL; bond classes + 3 specials
    return _grpe_layers(layers, d) + atom_rows * d + 3 * (spatial + edge) * d + d + 2 * d + (d + 1)


def _official_grpe(layers: int, d: int, node_rows: int, edge_types: int, max_hop: int = 5) -> int:
    """GRPENetwork of the official code: one node table, hop tables of max_hop + 3 rows and edge
    tables of edge_types + 4 rows (query / key / value each), task token, final LN, linear head."""
    return (_grpe_layers(layers, d) + node_rows * d + 3 * (max_hop + 3) * d + 3 * (edge_types + 4) * d
            + d + 2 * d + (d + 1))


@pytest.mark.parametrize("name,layers,d", [("tiny", 4, 64), ("small", 12, 80), ("standard", 12, 768), ("large", 18, 1024)])
def test_grpe_counts_match_the_closed_form(name, layers, d):
    assert count_parameters(get_preset("grpe", name).model) == _ours_grpe(layers, d)


@pytest.mark.parametrize("name,layers,d,node_rows,edge_types", [
    ("small", 12, 80, 25, 10),            # zinc.py: 25 node types, 10 edge types
    ("standard", 12, 768, 512 * 9 + 1, 30),  # gpp.py defaults for PCQM4Mv2
    ("large", 18, 1024, 512 * 9 + 1, 30),
])
def test_official_grpe_counts_reproduce_the_paper_and_explain_ours(name, layers, d, node_rows, edge_types):
    p = get_preset("grpe", name)
    official = _official_grpe(layers, d, node_rows, edge_types)
    assert official == p.info.official_params
    if name != "small":  # the paper's Standard / Large counts are the official code's, rounded
        assert round(official / 1e5) == round(p.info.paper_params / 1e5)
    # ours differs only by vocabulary rows: atom tables, edge classes, one more spatial class
    atom_rows = sum(OGB_ATOM_FEATURE_DIMS)
    vocab = (atom_rows - node_rows) * d + 3 * ((5 * 6 * 2 + 3) - (edge_types + 4)) * d + 3 * (9 - 8) * d
    assert count_parameters(p.model) == official + vocab


def test_summary_counts_equal_real_builds_for_small_presets():
    rows = {(r.model, r.preset): r for r in summarize_presets()}
    assert set(rows) == set(EVERY_PRESET)
    for key in [("grpe", "tiny"), ("gradformer", "molhiv"), ("moire", "mnist")]:
        torch.manual_seed(0)
        model = build_model(get_preset(*key).model)
        assert rows[key].params == sum(p.numel() for p in model.parameters())
    assert rows[("grpe", "tiny")].difference == pytest.approx(126_081 / 106_000 - 1)
    assert rows[("moire", "qm9")].difference is None


# --------------------------------------------------------------------------------------------
# every recipe trains one batch (small size, the recipe's optimiser settings)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model,name", EVERY_PRESET, ids=[f"{m}-{n}" for m, n in EVERY_PRESET])
def test_every_recipe_trains_one_batch(model, name):
    p = tiny_preset(model, name)
    ds = dataset_for(p.featurizer, p.relation, 0, 10)
    torch.manual_seed(0)
    net = build_model(p.model)
    before = [prm.detach().clone() for prm in net.parameters()]
    cfg = TrainConfig.from_recipe(p.train, epochs=1, batch_size=8, progress=False, device="cpu")
    result = Trainer(net, cfg).fit(Subset(ds, range(8)), Subset(ds, range(8, 10)))
    assert len(result.history) == 1 and torch.isfinite(torch.tensor(result.history["train_loss"].iloc[0]))
    changed = sum(not torch.equal(b, prm.detach()) for b, prm in zip(before, net.parameters()))
    assert changed >= len(before) // 2, f"only {changed} of {len(before)} parameter tensors moved"


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------


def test_presets_command_lists_every_preset_with_counts():
    code, out, _ = run_cli(["presets"])
    assert code == 0
    lines = out.splitlines()
    for model, name in EVERY_PRESET:
        assert any(line.split()[:2] == [model, name] for line in lines), (model, name)
    grpe_tiny = next(line for line in lines if line.split()[:2] == ["grpe", "tiny"])
    assert "126.1k" in grpe_tiny and "106.0k" in grpe_tiny and "+18.9%" in grpe_tiny


def test_presets_command_shows_one_recipe_and_rejects_unknown_names():
    code, out, _ = run_cli(["presets", "gradformer", "molhiv"])
    assert code == 0
    assert "train.lr: 0.0001" in out and "'local_model': 'gatedgcn'" in out and "run_hiv.sh" in out
    code, _, err = run_cli(["presets", "grpe", "huge"])
    assert code == 2 and err.startswith("error: unknown preset 'huge'")


def test_train_uses_the_recipe_and_explicit_flags_override_it(tmp_path):
    data = tmp_path / "d.csv"
    freesolv_rows(0, 30)[["smiles", "expt"]].to_csv(data, index=False)
    code, _, err = run_cli(["train", data, "--targets", "expt", "--out", tmp_path / "run", "--model", "gradformer",
                         "--preset", "nci1", "--epochs", "1", "--lr", "0.002", "--device", "cpu", "--no-progress"])
    assert code == 0, err
    used = load_checkpoint(tmp_path / "run" / "best.pt").meta.extra.train_config
    assert (used["epochs"], used["lr"]) == (1, 0.002)  # explicit flags
    assert (used["batch_size"], used["weight_decay"], used["schedule"], used["grad_clip"]) == (128, 1e-5, "constant", 0.0)
