"""Insight figures, rendered headless, checked for content: heat maps equal the attention the model
returns, molecule drawings map nodes to input atoms (``ndata["input_atom"]``), focus curves and
start points equal the learned parameters, parity/residual data and error tables."""
from __future__ import annotations


import numpy as np
import pandas as pd
import pytest
import torch
from rdkit import Chem

from conftest_models import freesolv_rows, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.featurize import MoleculeFeaturizer
from dgl_graphtx.insight import (
    attention_maps,
    error_table,
    plot_attention_heatmap,
    plot_attention_on_molecule,
    plot_focus_functions,
    plot_parity_residuals,
    plot_start_points,
)
from dgl_graphtx.models import build_model
from dgl_graphtx.training import seed_everything
from cli_runner import run_cli

SMILES = "CC(=O)Nc1ccc(O)cc1"


def _model(variant, **overrides):
    seed_everything(0)
    preset = tiny_preset(variant, **overrides)
    return build_model(preset.model).eval(), MoleculeFeaturizer(preset.featurizer, preset.relation), preset


def _dense_reference(model, featurizer, smiles):
    """Attention [L][H] as dicts (query, key) -> weight, straight from the model's edge output."""
    graph, relation = featurizer(smiles)
    with torch.no_grad():
        _, attentions = model(graph, relation, return_attention=True)
    src, dst = relation.edges()
    out = []
    for attn in attentions:
        out.append([{(int(i), int(j)): float(attn[e, h]) for e, (j, i) in enumerate(zip(src, dst))} for h in range(attn.shape[1])])
    return out, relation.num_nodes()


@pytest.mark.parametrize("variant,overrides", [("grpe", {}), ("moire", {}), ("gradformer", {})])
def test_heatmap_equals_the_attention_the_model_returns(variant, overrides):
    model, featurizer, _ = _model(variant, **overrides)
    maps = attention_maps(model, featurizer, SMILES)
    reference, n = _dense_reference(model, featurizer, SMILES)
    fig = plot_attention_heatmap(maps)
    panels = [ax for ax in fig.axes if ax.images and ax.get_title().startswith("layer")]
    assert len(panels) == len(reference) * len(reference[0])
    for ax in panels:
        layer, head = int(ax.get_title().split()[1]), int(ax.get_title().split()[3])
        shown = np.asarray(ax.images[0].get_array())
        expected = np.zeros((n, n))
        for (i, j), w in reference[layer][head].items():
            expected[i, j] = w
        np.testing.assert_allclose(shown, expected, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(shown.sum(1), 1.0, rtol=1e-5)  # each query's weights sum to 1
    labels = [t.get_text() for t in panels[0].get_xticklabels()]
    atoms = Chem.MolFromSmiles(SMILES).GetAtoms()
    assert labels[: len(atoms)] == [f"{a.GetSymbol()}{a.GetIdx()}" for a in atoms]
    assert (labels[-1] == "VN") == model.config.virtual_node


class _ReorderingFeaturizer(MoleculeFeaturizer):
    """Stands in for a canonical-ranking featurizer: node i holds input atom ``order[i]``."""

    def __init__(self, base, order):
        super().__init__(base.config, base.relation)
        self.order = order

    def __call__(self, molecule):
        graph, relation = super().__call__(molecule)
        graph.ndata["input_atom"] = torch.as_tensor(self.order, dtype=torch.int64)
        return graph, relation


def test_drawings_map_nodes_to_input_atoms():
    model, featurizer, _ = _model("grpe")
    n_atoms = Chem.MolFromSmiles(SMILES).GetNumAtoms()
    order = np.random.default_rng(0).permutation(n_atoms)
    maps = attention_maps(model, _ReorderingFeaturizer(featurizer, order), SMILES)
    assert maps.node_atoms.tolist() == [*order.tolist(), -1]
    query_atom = int(order[2])  # input atom held by node 2
    for layer in range(maps.weights.shape[0]):
        for head in (0, 1, None):
            row = maps.weights[layer, :, 2, :]
            row = row.mean(0) if head is None else row[head]
            expected = np.zeros(n_atoms)
            expected[order] = row[:n_atoms]
            np.testing.assert_allclose(maps.atom_weights(query_atom, layer, head), expected)
    identity = attention_maps(model, featurizer, SMILES)  # without input_atom: node i is atom i
    assert identity.node_atoms.tolist() == [*range(n_atoms), -1]
    fig = plot_attention_on_molecule(maps, query_atom, layers=[0], heads=[1])
    assert [ax.get_title() for ax in fig.axes] == ["layer 0 head 1", "layer 0 mean"]
    assert fig.axes[0].images[0].get_array().shape[:2] == (220, 220)
    assert f"atom {query_atom}" in fig._suptitle.get_text()


def test_virtual_node_query_and_errors():
    model, featurizer, _ = _model("grpe")
    maps = attention_maps(model, featurizer, "CCO")
    np.testing.assert_allclose(maps.atom_weights("virtual", 0, 0), maps.weights[0, 0, 3, :3])
    with pytest.raises(Exception, match="atom 7 is not in CCO"):
        maps.atom_weights(7, 0)
    model, featurizer, _ = _model("moire")
    with pytest.raises(Exception, match="no virtual node"):
        attention_maps(model, featurizer, "CCO").atom_weights("virtual", 0)


def test_focus_curves_are_the_learned_functions():
    model, _, _ = _model("moire")  # gaussian focus
    with torch.no_grad():
        for block in model.blocks:
            block.attention.structure.shift.copy_(torch.tensor([1.0, 3.0, 0.2, 2.5]))
            block.attention.structure.width.copy_(torch.tensor([0.5, 2.0, 1.0, 0.05]))
    fig = plot_focus_functions(model, max_distance=6.0)
    curves = [line for line in fig.axes[0].lines if len(line.get_xdata()) > 2]
    mu = [1.0, 3.0, 0.5, 2.5]        # shifts are clamped at 0.5 and widths at 0.1 in the forward pass
    sigma = [0.5, 2.0, 1.0, 0.1]
    for line, m, s in zip(curves, mu, sigma):
        d = np.asarray(line.get_xdata())
        np.testing.assert_allclose(line.get_ydata(), np.exp(-((d - m) ** 2) / s), rtol=1e-5, atol=1e-7)
        assert f"mu {m:.2f}, sigma {s:.2f}" in line.get_label()
    with pytest.raises(Exception, match="needs a MoireGT model"):
        plot_focus_functions(_model("grpe")[0])


def test_start_points_are_the_learned_ones():
    model, _, _ = _model("gradformer")
    with torch.no_grad():
        model.blocks[0].attention.structure.params.start.copy_(torch.tensor([0.5, 1.5, 2.5, 3.5]))
    fig = plot_start_points(model)
    heights = [round(bar.get_height(), 4) for bar in fig.axes[0].patches]
    expected = [float(v) for block in model.blocks for v in block.attention.structure.params.start.detach()]
    assert heights == pytest.approx(expected)
    assert "lambda = 0.500" in fig.axes[0].get_title()


def test_parity_residuals_and_error_table():
    y = np.array([1.0, 2.0, np.nan, 4.0])
    p = np.array([1.5, 1.0, 3.0, 4.0])
    fig = plot_parity_residuals(y, p, std=[0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(fig.axes[0].collections[-1].get_offsets(), [[1.0, 1.5], [2.0, 1.0], [4.0, 4.0]])
    np.testing.assert_allclose(fig.axes[1].collections[0].get_offsets()[:, 1], [0.5, -1.0, 0.0])
    assert "RMSE 0.645" in fig.axes[0].get_legend().get_texts()[0].get_text()  # sqrt((0.25 + 1) / 3)
    table = error_table(["a", "b", "c", "d"], y, p, std=[0.1, 0.2, 0.3, 0.4])
    assert table["smiles"].tolist()[:3] == ["b", "a", "d"] and table["std"].tolist()[:3] == [0.2, 0.1, 0.4]




@pytest.mark.parametrize("variant", ["grpe", "moire", "gradformer"])
def test_plot_command(variant, tmp_path):
    model, _, preset = _model(variant)
    checkpoint = save_checkpoint(tmp_path / "m.pt", model, CheckpointMeta(preset.featurizer, preset.relation, ["expt"]))
    data = tmp_path / "d.csv"
    rows = freesolv_rows(0, 11)[["smiles", "expt"]].copy()
    rows.loc[rows.index[-1], "expt"] = float("nan")  # an unlabelled molecule
    rows.to_csv(data, index=False)
    code, stdout, err = run_cli(["plot", "attention", "--checkpoint", checkpoint, "--smiles", "CCO", "--per-head", "--query", "1",
                              "--out", tmp_path / "a.svg", "--layers", "1"])
    assert code == 0, err
    assert (tmp_path / "a.svg").read_text().lstrip().startswith("<?xml") and (tmp_path / "a_heatmap.svg").is_file()
    kind = {"moire": "focus", "gradformer": "decay", "grpe": None}[variant]
    if kind:
        assert run_cli(["plot", kind, "--checkpoint", checkpoint, "--out", tmp_path / "k.png"])[0] == 0
        assert (tmp_path / "k.png").read_bytes()[:4] == b"\x89PNG"
    else:
        code, _, err = run_cli(["plot", "focus", "--checkpoint", checkpoint, "--out", tmp_path / "k.png"])
        assert code == 2 and "needs a MoireGT model" in err
    code, _, err = run_cli(["plot", "parity", "--checkpoint", checkpoint, "--data", data, "--out", tmp_path / "p.png", "-q"])
    assert code == 0, err
    errors = pd.read_csv(tmp_path / "p_errors.csv", keep_default_na=False)
    assert len(errors) == 11 and errors["abs_error"][:10].astype(float).is_monotonic_decreasing
    # why a molecule has no error: every one has a prediction here, the last no label
    assert errors["reason"].tolist() == [""] * 10 + ["no measured value"]
    assert errors["smiles"].iloc[-1] == rows["smiles"].iloc[-1]


def test_training_never_imports_rdkit_drawing_code(tmp_path):
    """On a server without X libraries, importing rdkit.Chem.Draw fails (libXrender.so.1); `train`
    used to crash at import because the figures module imported it at module level."""
    import subprocess
    import sys
    data = tmp_path / "d.csv"
    freesolv_rows(0, 20)[["smiles", "expt"]].to_csv(data, index=False)
    script = ("import sys; sys.modules['rdkit.Chem.Draw'] = None\n"  # what a missing libXrender.so.1 amounts to
              "from dgl_graphtx.cli import main\n"
              f"code = main(['train', {str(data)!r}, '--targets', 'expt', '--out', {str(tmp_path / 'run')!r}, "
              "'--model', 'vanilla', '--epochs', '1', '--no-cache', '-q', '--set', 'model.num_layers=1', "
              "'model.hidden_dim=16', 'model.num_heads=2'])\n"
              "assert 'rdkit.Chem.Draw.rdMolDraw2D' not in sys.modules\n"
              "sys.exit(code)\n")
    job = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert job.returncode == 0, job.stderr[-2000:]
    assert (tmp_path / "run" / "best.pt").is_file()


def test_drawing_without_rdkit_drawing_code_is_one_error_line(tmp_path, monkeypatch):
    import sys
    from cli_runner import assert_one_error_line
    model, _, preset = _model("grpe")
    checkpoint = save_checkpoint(tmp_path / "m.pt", model, CheckpointMeta(preset.featurizer, preset.relation, ["expt"]))
    monkeypatch.setitem(sys.modules, "rdkit.Chem.Draw", None)
    assert_one_error_line(run_cli(["plot", "attention", "--checkpoint", checkpoint, "--smiles", "CCO", "--out", tmp_path / "a.png"]),
                          "drawing a molecule needs RDKit's drawing code", "libxrender1")


def test_the_query_is_used_or_refused_never_ignored(tmp_path):
    """`--query virtual` was silently ignored without --per-head (the README's example) while
    --per-head refused it on a model without a virtual node: now a query is used, or refused."""
    from cli_runner import assert_one_error_line
    saved = {}
    for variant in ("grpe", "moire"):  # with and without a virtual node
        model, _, preset = _model(variant)
        saved[variant] = save_checkpoint(tmp_path / f"{variant}.pt", model, CheckpointMeta(preset.featurizer, preset.relation, ["y"]))
    plot = ["plot", "attention", "--smiles", "CCO"]
    assert_one_error_line(run_cli([*plot, "--checkpoint", saved["grpe"], "--query", "virtual", "--out", tmp_path / "a.png"]),
                          "--query chooses the query of the --per-head panels", "add --per-head")
    assert_one_error_line(run_cli([*plot, "--checkpoint", saved["moire"], "--per-head", "--out", tmp_path / "b.png"]),
                          "this model has no virtual node", "--query 0 .. 2")
    assert_one_error_line(run_cli([*plot, "--checkpoint", saved["moire"], "--per-head", "--query", "virtual", "--out", tmp_path / "b.png"]),
                          "this model has no virtual node")
    assert_one_error_line(run_cli([*plot, "--checkpoint", saved["grpe"], "--per-head", "--query", "first", "--out", tmp_path / "c.png"]),
                          "--query", "'virtual' or an atom index")
    code, out, err = run_cli([*plot, "--checkpoint", saved["grpe"], "--per-head", "--out", tmp_path / "d.png"])
    assert code == 0 and "query: the virtual node" in out, err
    code, out, err = run_cli([*plot, "--checkpoint", saved["moire"], "--per-head", "--query", "2", "--out", tmp_path / "e.png"])
    assert code == 0 and "query: atom 2" in out, err
    layers, heads = _model("moire")[0].config.num_layers, _model("moire")[0].config.num_heads
    per_head = [*plot, "--checkpoint", saved["moire"], "--per-head", "--query", "0", "--out", tmp_path / "f.png"]
    for option, value, said in (("--layers", str(layers), f"the model has {layers} (layers 0..{layers - 1})"),
                                ("--heads", str(heads), f"the model has {heads} (heads 0..{heads - 1})"),
                                ("--heads", "-1", "(heads 0.."), ("--layers", "x", "comma-separated numbers, got 'x'")):
        assert_one_error_line(run_cli([*per_head, f"{option}={value}"]), option, said)  # the probe: IndexError, or -1 as Python's last


def test_attention_of_a_model_that_reads_descriptors(tmp_path):
    """`plot attention` on a run of the default recipe (RDKit descriptors in the head) ended in
    "model expects 217 molecule-level extra features": the drawing featurized without them."""
    from cli_runner import assert_one_error_line
    from dgl_graphtx.inference import Predictor
    data = tmp_path / "d.csv"
    freesolv_rows(0, 20)[["smiles", "expt"]].to_csv(data, index=False)
    code, _, err = run_cli(["train", data, "--targets", "expt", "--out", tmp_path / "run", "--model", "grpe", "--epochs", "1",
                            "--no-cache", "-q", "--set", "model.num_layers=2", "model.hidden_dim=16", "model.num_heads=2"])
    assert code == 0, err
    code, out, err = run_cli(["plot", "attention", "--checkpoint", tmp_path / "run", "--smiles", SMILES, "--out", tmp_path / "a.png"])
    assert code == 0 and "most important atoms" in out, err
    predictor = Predictor(tmp_path / "run")
    config = predictor.model.config
    assert config.molecule_features and config.kernel_references
    graph, relation = predictor.featurizer(SMILES)
    graph.ndata["mol_features"] = torch.zeros(graph.num_nodes(), config.molecule_features)  # the head's and the kernel's
    graph.ndata["kernel_fp"] = torch.zeros(graph.num_nodes(), config.kernel_size)  # inputs: attention reads neither
    with torch.no_grad():
        _, reference = predictor.model(graph, relation, return_attention=True)
    maps = predictor.attention_maps(SMILES)
    src, dst = relation.edges()
    for layer, attn in enumerate(reference):
        np.testing.assert_allclose(maps.weights[layer][:, dst.numpy(), src.numpy()], attn.numpy().T, rtol=1e-5, atol=1e-7)
    assert maps.node_atoms.tolist() == [*graph.ndata["input_atom"].tolist(), -1]
    with pytest.raises(Exception, match=r"reads extra features .* Predictor\(checkpoint\)\.attention_maps"):
        attention_maps(predictor.model, predictor.featurizer, SMILES)
    assert_one_error_line(run_cli(["plot", "attention", "--checkpoint", tmp_path / "run", "--smiles", "C1CC", "--out", tmp_path / "b.png"]),
                          "cannot explain 'C1CC'")


def test_parity_of_a_file_without_a_usable_pair_is_one_line(tmp_path):
    """A file whose molecules all fail or lack labels ended in numpy's "zero-size array to
    reduction operation minimum" traceback."""
    from cli_runner import assert_one_error_line
    from dgl_graphtx.errors import GraphTxError
    with pytest.raises(GraphTxError, match="none of the 2 molecules has both"):
        plot_parity_residuals([1.0, np.nan], [np.nan, 2.0])
    model, _, preset = _model("grpe")
    checkpoint = save_checkpoint(tmp_path / "m.pt", model, CheckpointMeta(preset.featurizer, preset.relation, ["expt"]))
    data = tmp_path / "d.csv"
    data.write_text("smiles,expt\nC1CC,-3\nCCO,\n")
    assert_one_error_line(run_cli(["plot", "parity", "--checkpoint", checkpoint, "--data", data, "--out", tmp_path / "p.png", "-q"]),
                          "none of the 2 rows", "C1CC: SMILES syntax error")
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("variant", ["grpe", "moire"])
def test_hydrogens_the_featurizer_adds_are_drawn_as_hydrogens_not_as_the_virtual_node(variant):
    """With explicit hydrogens the added hydrogens (``input_atom`` -1) were read as the virtual node:
    ``--query virtual`` drew the first hydrogen's row (and was accepted on MoireGT, which has none)."""
    import dataclasses
    seed_everything(0)
    preset = tiny_preset(variant)
    featurizer = MoleculeFeaturizer(dataclasses.replace(preset.featurizer, explicit_hydrogens=True), preset.relation)
    smiles = "OCC(=O)[O-].[Na+]"
    maps = attention_maps(build_model(preset.model).eval(), featurizer, smiles)
    graph, relation = featurizer(smiles)
    mol = maps.mol
    assert mol.GetNumAtoms() == 9 and sorted(maps.node_atoms[:graph.num_nodes()].tolist()) == list(range(9))
    src, dst = graph.edges()
    for a, b in zip(src.tolist(), dst.tolist()):  # every bond of the graph is a bond of the drawn molecule
        assert mol.GetBondBetweenAtoms(int(maps.node_atoms[a]), int(maps.node_atoms[b])) is not None
    if variant == "grpe":
        assert maps.virtual_index == relation.num_nodes() - 1 == graph.num_nodes()
    else:
        with pytest.raises(Exception, match="no virtual node"):
            maps.query_node("virtual")
