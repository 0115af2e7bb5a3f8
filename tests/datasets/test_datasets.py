"""Datasets: building from DataFrame / CSV / SDF, labels and masks, reports, packing, loading,
caching, splits and the embedded FreeSolv data."""
from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest
import torch
from rdkit import Chem
from rdkit.Chem.Scaffolds import MurckoScaffold
from torch.utils.data import DataLoader, Subset

import dgl
from dgl_graphtx.datasets import (
    FREESOLV_TARGET,
    MoleculeBatch,
    MoleculeDataset,
    PackedGraphs,
    collate_molecules,
    freesolv,
    freesolv_path,
    random_split,
    scaffold_split,
)
from dgl_graphtx.errors import ConfigError, InvalidMoleculeError
from dgl_graphtx.featurize import FeaturizerConfig, MoleculeFeaturizer
from dgl_graphtx.relation_graph import RelationConfig

# Row 3 is invalid (unclosed ring); row 5 has a non-numeric value in y1; blanks in y2.
ROWS = [
    ("CCO", 1.0, 10.0),
    ("c1ccccc1O", 2.0, None),
    ("CC(=O)[O-].[Na+]", 3.0, 30.0),
    ("C1CC", 4.0, 40.0),
    ("C", float("nan"), 50.0),
    ("CCN", "abc", ""),
    ("c1ccc2ccccc2c1", 7.0, 70.0),
]
VALID_ROWS = [0, 1, 2, 4, 5, 6]


def _frame():
    return pd.DataFrame(ROWS, columns=["smiles", "y1", "y2"])


def _expected_labels(row):
    """(labels, mask) for input row ``row`` computed by hand from ROWS."""
    labels, mask = [], []
    for value in ROWS[row][1:]:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        ok = value is not None and not math.isnan(number)
        labels.append(number if ok else 0.0)
        mask.append(ok)
    return labels, mask


def _assert_graphs_equal(a: dgl.DGLGraph, b: dgl.DGLGraph):
    assert a.num_nodes() == b.num_nodes() and a.num_edges() == b.num_edges()
    sa, da = a.edges()
    sb, db = b.edges()
    assert torch.equal(sa.long(), sb.long()) and torch.equal(da.long(), db.long())
    assert set(a.ndata.keys()) == set(b.ndata.keys())
    assert set(a.edata.keys()) == set(b.edata.keys())
    for key in a.ndata.keys():
        assert a.ndata[key].dtype == b.ndata[key].dtype
        assert torch.equal(a.ndata[key], b.ndata[key]), key
    for key in a.edata.keys():
        assert a.edata[key].dtype == b.edata[key].dtype
        assert torch.equal(a.edata[key], b.edata[key]), key
    assert a.batch_size == b.batch_size
    assert torch.equal(a.batch_num_nodes(), b.batch_num_nodes())
    assert torch.equal(a.batch_num_edges(), b.batch_num_edges())


def _atomic_numbers(graph):
    """Atomic numbers of each molecule of a (batched) graph, in the input's atom order (nodes are in
    canonical order; ``input_atom`` maps them back)."""
    out = []
    for g in dgl.unbatch(graph):
        numbers = [0] * g.num_nodes()
        for node, atom in enumerate(g.ndata["input_atom"].tolist()):
            numbers[atom] = int(g.ndata["feat"][node, 0]) + 1
        out += numbers
    return out


# --------------------------------------------------------------------------------------------
# building, labels, masks, reports
# --------------------------------------------------------------------------------------------
def test_from_dataframe_labels_masks_and_report():
    ds = MoleculeDataset.from_dataframe(_frame(), "smiles", ["y1", "y2"], progress=False)
    assert len(ds) == len(VALID_ROWS)
    assert ds.target_names == ["y1", "y2"] and ds.num_tasks == 2
    assert ds.rows.tolist() == VALID_ROWS
    for k, row in enumerate(VALID_ROWS):
        graph, rel, labels, mask = ds[k]
        mol = Chem.MolFromSmiles(ROWS[row][0])
        assert _atomic_numbers(graph) == [a.GetAtomicNum() for a in mol.GetAtoms()]
        assert rel.num_edges() == mol.GetNumAtoms() ** 2
        want_labels, want_mask = _expected_labels(row)
        assert mask.dtype == torch.bool and labels.dtype == torch.float32
        assert mask.tolist() == want_mask
        assert labels.tolist() == pytest.approx(want_labels)
    # the invalid row is skipped and reported, the non-numeric label is masked and reported
    report = ds.report
    assert report.total_rows == len(ROWS)
    assert report.num_skipped == 1
    skipped = report.skipped[0]
    assert (skipped.row, skipped.smiles, skipped.action) == (3, "C1CC", "skipped")
    assert "syntax" in skipped.reason
    masked = [i for i in report.issues if i.action == "label_masked"]
    assert [(i.row, i.smiles) for i in masked] == [(5, "CCN")]
    assert "abc" in masked[0].reason and "y1" in masked[0].reason


def test_from_csv_and_report_export_and_log(tmp_path, caplog):
    path = tmp_path / "mols.csv"
    _frame().to_csv(path, index=False)
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        ds = MoleculeDataset.from_csv(path, "smiles", ["y1", "y2"], progress=False)
    assert ds.rows.tolist() == VALID_ROWS
    for k, row in enumerate(VALID_ROWS):
        want_labels, want_mask = _expected_labels(row)
        _, _, labels, mask = ds[k]
        assert mask.tolist() == want_mask
        assert labels.tolist() == pytest.approx(want_labels)
    # one summary line on the package logger naming the skipped row
    lines = [r for r in caplog.records if r.name == "dgl_graphtx" and "MoleculeDataset" in r.getMessage()]
    assert len(lines) == 1
    message = lines[0].getMessage()
    assert lines[0].levelno == logging.WARNING
    assert f"kept {len(VALID_ROWS)} of {len(ROWS)}" in message
    assert "skipped 1" in message and "row 3" in message and "C1CC" in message
    assert "masked unusable label values (1 in the input report; first: row 5" in message
    # report export
    out = ds.report.to_csv(tmp_path / "sub" / "issues.csv")
    table = pd.read_csv(out)
    assert list(table.columns) == ["row", "smiles", "reason", "action"]
    assert table["row"].tolist() == [3, 5]
    assert table["smiles"].tolist() == ["C1CC", "CCN"]
    assert table["action"].tolist() == ["skipped", "label_masked"]
    assert "syntax" in table["reason"][0]


def test_clean_input_logs_info_without_issues(caplog):
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        ds = MoleculeDataset(["CCO", "CC"], [[1.0], [2.0]], target_names=["y"], progress=False)
    assert len(ds.report) == 0
    lines = [r for r in caplog.records if r.name == "dgl_graphtx" and "MoleculeDataset" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert "kept 2 of 2" in lines[0].getMessage()


def test_list_targets_with_none_and_text():
    ds = MoleculeDataset(["CCO", "CC", "CCC"], [[1.5], [None], ["x"]], progress=False)
    assert ds.target_names == ["target_0"]
    labels = [ds[i][2].tolist() for i in range(3)]
    masks = [ds[i][3].tolist() for i in range(3)]
    assert labels == [[1.5], [0.0], [0.0]] and masks == [[True], [False], [False]]
    assert [(i.row, i.action) for i in ds.report.issues] == [(2, "label_masked")]


def test_no_targets():
    ds = MoleculeDataset(["CCO", "CC"], progress=False)
    assert ds.num_tasks == 0
    _, _, labels, mask = ds[0]
    assert labels.shape == (0,) and mask.shape == (0,)


def test_missing_smiles_cell_is_reported():
    frame = pd.DataFrame({"smiles": ["CCO", None, "CC"], "y": [1.0, 2.0, 3.0]})
    ds = MoleculeDataset.from_dataframe(frame, "smiles", ["y"], progress=False)
    assert ds.rows.tolist() == [0, 2]
    assert ds.report.skipped[0].row == 1 and "empty" in ds.report.skipped[0].reason


def test_strict_raises_naming_row_and_smiles():
    with pytest.raises(InvalidMoleculeError) as info:
        MoleculeDataset.from_dataframe(_frame(), "smiles", ["y1", "y2"], strict=True, progress=False)
    assert "row 3" in str(info.value) and "C1CC" in str(info.value)


def test_all_invalid_and_empty_inputs_raise():
    with pytest.raises(InvalidMoleculeError, match="no valid molecule"):
        MoleculeDataset(["C1CC", "", "CN(C)(C)(C)C"], progress=False)
    with pytest.raises(ConfigError):
        MoleculeDataset([], progress=False)
    with pytest.raises(ConfigError):
        MoleculeDataset.from_dataframe(_frame(), "smi", progress=False)
    with pytest.raises(ConfigError):
        MoleculeDataset(["CC", "CCO"], [[1.0]], progress=False)
    # four values for two molecules must not be silently refolded into two target columns
    with pytest.raises(ConfigError, match="4 target rows for 2 molecules"):
        MoleculeDataset(["CC", "CCO"], [1.0, 2.0, 3.0, 4.0], progress=False)
    with pytest.raises(ConfigError):
        MoleculeDataset(["CC", "CCO"], [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], progress=False)
    with pytest.raises(ConfigError):
        MoleculeDataset(["CC", "CCO"], [[1.0], [2.0]], target_names=["a", "b"], progress=False)


def test_one_molecule_and_misshapen_targets_are_refused_not_reread():
    # a string is a sequence of letters: "CCO" would have been three molecules C, C and O
    for one in ("CCO", Chem.MolFromSmiles("CCO")):
        with pytest.raises(ConfigError, match=r"molecules is one molecule, 'CCO'; pass a list of molecules, e.g. \['CCO'\]"):
            MoleculeDataset(one, progress=False)
    # a [molecules x 2 x 2] array would have been flattened into four target columns
    with pytest.raises(ConfigError, match=r"targets have shape \(2, 2, 2\)"):
        MoleculeDataset(["CC", "CCO"], np.zeros((2, 2, 2)), progress=False)


def test_targets_dict_reads_as_named_columns():
    ds = MoleculeDataset(["CC", "CCO", "CCN"], {"logp": [1.0, None, 3.0], "mw": [30.0, 46.0, 45.0]}, progress=False)
    assert ds.target_names == ["logp", "mw"]
    assert [ds[i][2].tolist() for i in range(3)] == [[1.0, 30.0], [0.0, 46.0], [3.0, 45.0]]
    assert [ds[i][3].tolist() for i in range(3)] == [[True, True], [False, True], [True, True]]
    with pytest.raises(ConfigError, match="got 2 target rows for 3 molecules"):
        MoleculeDataset(["CC", "CCO", "CCN"], {"logp": [1.0, 2.0]}, progress=False)
    with pytest.raises(ConfigError, match="cannot read the targets dict as columns .*give each target a column of 3 values"):
        MoleculeDataset(["CC", "CCO", "CCN"], {"logp": [1.0, 2.0, 3.0], "mw": [30.0]}, progress=False)


def test_from_sdf_properties_as_targets_and_coordinates(sdf_path, sdf_records):
    energy = "r_mmffld_Potential_Energy-OPLS_2005"
    ds = MoleculeDataset.from_sdf(
        sdf_path, [energy, "Cluster"], featurizer=FeaturizerConfig(coordinates="conformer"), progress=False
    )
    assert len(ds) == 8 and ds.report.num_skipped == 0
    assert ds.target_names == [energy, "Cluster"]
    for k, record in enumerate(sdf_records):
        graph, rel, labels, mask = ds[k]
        assert mask.tolist() == [True, True]
        assert labels[0].item() == pytest.approx(float(record["props"][energy]), abs=1e-3)
        assert labels[1].item() == float(record["props"]["Cluster"])
        heavy = [i for i, s in enumerate(record["symbols"]) if s != "H"]
        heavy = [heavy[i] for i in graph.ndata["input_atom"].tolist()]  # in node order
        np.testing.assert_allclose(graph.ndata["pos"].numpy(), record["coords"][heavy], atol=1e-4)
        assert "dist" in rel.edata
    assert ds[0][2][0].item() == pytest.approx(-78.6454, abs=1e-3)  # first record, read by eye


def test_from_sdf_with_hydrogens_and_unreadable_record(tmp_path, sdf_path, sdf_records):
    text = sdf_path.read_text()
    blocks = [b for b in text.split("$$$$\n") if b.strip()]
    # make record 1 unreadable by corrupting its counts line (999 atoms announced)
    lines = blocks[1].splitlines()
    lines[3] = "999" + lines[3][3:]
    blocks[1] = "\n".join(lines) + "\n"
    path = tmp_path / "broken.sdf"
    path.write_text("$$$$\n".join(blocks) + "$$$$\n")
    ds = MoleculeDataset.from_sdf(path, ["Cluster"], featurizer=FeaturizerConfig(explicit_hydrogens=True), progress=False)
    assert len(ds) == 7
    assert ds.rows.tolist() == [0, 2, 3, 4, 5, 6, 7]
    assert ds.report.skipped[0].row == 1
    assert "SDF record 1" in ds.report.skipped[0].smiles
    for k, row in enumerate(ds.rows.tolist()):
        assert ds[k][0].num_nodes() == len(sdf_records[row]["symbols"])


# --------------------------------------------------------------------------------------------
# packing, batching and loading
# --------------------------------------------------------------------------------------------
PACK_SMILES = ["CCO", "C", "[Na+].[Cl-]", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "C[N+](C)(C)C", "CC#N", "O"]


@pytest.mark.parametrize(
    "config, relation",
    [
        (FeaturizerConfig(), RelationConfig()),
        (FeaturizerConfig(atom_features="canonical", rwse_steps=3), RelationConfig("hops", hops=2, virtual_node=True)),
    ],
)
def test_packed_batch_equals_dgl_batch(config, relation):
    f = MoleculeFeaturizer(config, relation)
    pairs = [f(s) for s in PACK_SMILES]
    graphs = [g for g, _ in pairs]
    relations = [r for _, r in pairs]
    rng = np.random.default_rng(123)
    for source in (graphs, relations):
        packed = PackedGraphs.from_graphs(source)
        assert len(packed) == len(source)
        for _ in range(3):
            idx = rng.permutation(len(source))[: rng.integers(1, len(source) + 1)].tolist()
            _assert_graphs_equal(packed.batch(idx), dgl.batch([source[i] for i in idx]))
        _assert_graphs_equal(packed.batch([2, 2, 0]), dgl.batch([source[2], source[2], source[0]]))
        for i in range(len(source)):
            _assert_graphs_equal(packed[i], source[i])
        _assert_graphs_equal(packed[-1], source[-1])
        restored = PackedGraphs.from_state_dict(packed.state_dict())
        _assert_graphs_equal(restored.batch([3, 1]), dgl.batch([source[3], source[1]]))
        with pytest.raises(IndexError):
            packed.batch([len(source)])
        with pytest.raises(IndexError):
            packed[len(source)]


def _indexed_dataset(smiles=PACK_SMILES, **kwargs):
    """A dataset whose only target is the input row index, to identify molecules in batches."""
    return MoleculeDataset(smiles, [[float(i)] for i in range(len(smiles))], target_names=["row"], progress=False, **kwargs)


def test_getitems_equals_collate_of_items():
    ds = _indexed_dataset(relation=RelationConfig(virtual_node=True))
    idx = [5, 0, 3, 1, 7]
    fast = ds.__getitems__(idx)
    slow = collate_molecules([ds[i] for i in idx])
    assert isinstance(fast, MoleculeBatch) and isinstance(slow, MoleculeBatch)
    _assert_graphs_equal(fast.graph, slow.graph)
    _assert_graphs_equal(fast.relation_graph, slow.relation_graph)
    assert torch.equal(fast.labels, slow.labels) and torch.equal(fast.mask, slow.mask)
    assert fast.labels[:, 0].tolist() == [5.0, 0.0, 3.0, 1.0, 7.0]
    assert ds.__getitems__([-1, -8]).labels[:, 0].tolist() == [len(ds) - 1.0, len(ds) - 8.0]  # from the end, as ds[-1]
    with pytest.raises(IndexError):
        ds.__getitems__([-len(ds) - 1])
    assert collate_molecules(fast) is fast
    assert fast.batch_size == 5
    with pytest.raises(ValueError):
        collate_molecules([])


def _check_batch_against_rdkit(batch, smiles):
    rows = [int(v) for v in batch.labels[:, 0].tolist()]
    counts = [Chem.MolFromSmiles(smiles[r]).GetNumAtoms() for r in rows]
    assert batch.graph.batch_num_nodes().tolist() == counts
    assert batch.relation_graph.batch_num_nodes().tolist() == counts
    assert batch.relation_graph.batch_num_edges().tolist() == [c * c for c in counts]
    atomic = []
    for r in rows:
        atomic += [a.GetAtomicNum() for a in Chem.MolFromSmiles(smiles[r]).GetAtoms()]
    assert _atomic_numbers(batch.graph) == atomic
    return rows


def test_dataloader_shuffle_covers_every_molecule_once():
    ds = _indexed_dataset()
    loader = DataLoader(ds, batch_size=3, shuffle=True, collate_fn=collate_molecules,
                        generator=torch.Generator().manual_seed(0))
    seen = []
    sizes = []
    for batch in loader:
        assert isinstance(batch, MoleculeBatch)
        graph, relation_graph, labels, mask = batch  # unpacks as documented
        assert mask.all()
        sizes.append(batch.batch_size)
        seen += _check_batch_against_rdkit(batch, PACK_SMILES)
    assert sorted(seen) == list(range(len(PACK_SMILES)))
    assert sizes == [3, 3, 2]
    assert seen != list(range(len(PACK_SMILES)))  # shuffled (fixed generator, checked once)


def test_subset_with_dataloader():
    ds = _indexed_dataset()
    subset = Subset(ds, [4, 1, 6])
    batches = list(DataLoader(subset, batch_size=2, collate_fn=collate_molecules))
    assert [b.labels[:, 0].tolist() for b in batches] == [[4.0, 1.0], [6.0]]
    for b in batches:
        _check_batch_against_rdkit(b, PACK_SMILES)


def test_batch_to_device_cpu():
    ds = _indexed_dataset()
    batch = ds.__getitems__([0, 1]).to("cpu")
    assert batch.labels.device.type == "cpu" and batch.graph.device.type == "cpu"


# --------------------------------------------------------------------------------------------
# cache
# --------------------------------------------------------------------------------------------
def _forbid_featurizing(monkeypatch):
    def boom(self, molecule):
        raise AssertionError("featurizer called although the cache should have been used")

    monkeypatch.setattr(MoleculeFeaturizer, "__call__", boom)


def test_cache_reused_with_same_settings(tmp_path, monkeypatch):
    path = tmp_path / "mols.csv"
    _frame().to_csv(path, index=False)
    cache = tmp_path / "cache"
    first = MoleculeDataset.from_csv(path, "smiles", ["y1", "y2"], cache_dir=cache, progress=False)
    assert first.cache_file is not None and first.cache_file.exists()
    assert first.cache_file.parent == cache
    with monkeypatch.context() as m:
        _forbid_featurizing(m)
        second = MoleculeDataset.from_csv(path, "smiles", ["y1", "y2"], cache_dir=cache, progress=False)
    assert second.cache_file == first.cache_file
    assert len(second) == len(first)
    assert second.rows.tolist() == VALID_ROWS
    for k in range(len(first)):
        a, b = first[k], second[k]
        _assert_graphs_equal(a[0], b[0])
        _assert_graphs_equal(a[1], b[1])
        assert torch.equal(a[2], b[2]) and torch.equal(a[3], b[3])
    # the cached report is restored: skipped and masked rows are still reported
    assert [(i.row, i.action) for i in second.report.issues] == [(3, "skipped"), (5, "label_masked")]
    assert second.report.skipped[0].smiles == "C1CC"
    # strict mode still refuses the cached dataset with an invalid row
    with monkeypatch.context() as m:
        _forbid_featurizing(m)
        with pytest.raises(InvalidMoleculeError, match="row 3"):
            MoleculeDataset.from_csv(path, "smiles", ["y1", "y2"], cache_dir=cache, strict=True, progress=False)


def test_cache_key_changes_with_settings(tmp_path):
    cache = tmp_path / "cache"
    smiles = ["CCO", "c1ccccc1"]
    base = MoleculeDataset(smiles, [[1.0], [2.0]], cache_dir=cache, progress=False)
    variants = [
        dict(featurizer=FeaturizerConfig(atom_features="canonical")),
        dict(featurizer=FeaturizerConfig(explicit_hydrogens=True)),
        dict(featurizer=FeaturizerConfig(rwse_steps=2)),
        dict(relation=RelationConfig("hops", hops=2)),
        dict(relation=RelationConfig(virtual_node=True)),
    ]
    files = {base.cache_file}
    for kwargs in variants:
        ds = MoleculeDataset(smiles, [[1.0], [2.0]], cache_dir=cache, progress=False, **kwargs)
        assert ds.cache_file not in files, kwargs
        files.add(ds.cache_file)
    # the variants really were featurized with their own settings
    hydrogens = MoleculeDataset(smiles, [[1.0], [2.0]], cache_dir=cache, progress=False,
                                featurizer=FeaturizerConfig(explicit_hydrogens=True))
    assert hydrogens[0][0].num_nodes() == Chem.AddHs(Chem.MolFromSmiles("CCO")).GetNumAtoms()
    vn = MoleculeDataset(smiles, [[1.0], [2.0]], cache_dir=cache, progress=False,
                         relation=RelationConfig(virtual_node=True))
    assert vn[0][1].num_nodes() == 4
    # different labels for the same SMILES: a different cache entry with the new labels
    relabelled = MoleculeDataset(smiles, [[5.0], [6.0]], cache_dir=cache, progress=False)
    assert relabelled.cache_file not in files
    assert relabelled[0][2].tolist() == [5.0]


def test_stale_cache_not_reused_after_csv_change(tmp_path):
    path = tmp_path / "mols.csv"
    cache = tmp_path / "cache"
    pd.DataFrame({"smiles": ["CCO", "CC", "CCN"], "y": [1.0, 2.0, 3.0]}).to_csv(path, index=False)
    old = MoleculeDataset.from_csv(path, "smiles", ["y"], cache_dir=cache, progress=False)
    assert [old[i][2].item() for i in range(3)] == [1.0, 2.0, 3.0]
    pd.DataFrame({"smiles": ["CCO", "CC", "CCN"], "y": [-1.0, -2.0, -3.0]}).to_csv(path, index=False)
    new = MoleculeDataset.from_csv(path, "smiles", ["y"], cache_dir=cache, progress=False)
    assert new.cache_file != old.cache_file
    assert [new[i][2].item() for i in range(3)] == [-1.0, -2.0, -3.0]
    # changing a molecule is seen too
    pd.DataFrame({"smiles": ["CCO", "CCCC", "CCN"], "y": [-1.0, -2.0, -3.0]}).to_csv(path, index=False)
    changed = MoleculeDataset.from_csv(path, "smiles", ["y"], cache_dir=cache, progress=False)
    assert changed[1][0].num_nodes() == 4


def test_corrupt_cache_is_ignored_and_rebuilt(tmp_path, caplog):
    from dgl_graphtx.datasets.cache import load_cached

    cache = tmp_path / "cache"
    smiles = ["CCO", "C1CC", "CC"]
    first = MoleculeDataset(smiles, [[1.0], [2.0], [3.0]], cache_dir=cache, progress=False)
    first.cache_file.write_bytes(b"this is not a torch file")
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        rebuilt = MoleculeDataset(smiles, [[1.0], [2.0], [3.0]], cache_dir=cache, progress=False)
    assert any("cache" in r.getMessage() for r in caplog.records if r.name == "dgl_graphtx")
    assert rebuilt.cache_file == first.cache_file
    assert len(rebuilt) == 2 and rebuilt.report.num_skipped == 1
    assert [rebuilt[i][2].item() for i in range(2)] == [1.0, 3.0]
    # the rebuilt cache is a valid file again
    payload = load_cached(rebuilt.cache_file)
    assert isinstance(payload, dict) and payload["rows"].tolist() == [0, 2]


# --------------------------------------------------------------------------------------------
# splits
# --------------------------------------------------------------------------------------------
def _check_partition(split, n):
    parts = [set(split.train), set(split.valid), set(split.test)]
    assert sum(len(p) for p in parts) == len(split.train) + len(split.valid) + len(split.test)  # no duplicates
    assert not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
    assert parts[0] | parts[1] | parts[2] == set(range(n))


def test_random_split():
    n = 97
    a = random_split(n, (0.8, 0.1, 0.1), seed=3)
    b = random_split(n, (0.8, 0.1, 0.1), seed=3)
    c = random_split(n, (0.8, 0.1, 0.1), seed=4)
    _check_partition(a, n)
    _check_partition(c, n)
    assert a == b
    assert a != c
    assert (len(a.train), len(a.valid), len(a.test)) == (78, 10, 9)
    with pytest.raises(ConfigError):
        random_split(10, (0.5, 0.3, 0.3))
    with pytest.raises(ConfigError):
        random_split(10, (0.5, 0.5))


@pytest.fixture(scope="module")
def freesolv_frame():
    return freesolv()


def test_scaffold_split_keeps_scaffolds_together(freesolv_frame):
    smiles = freesolv_frame["smiles"].tolist()
    n = len(smiles)
    scaffold_of = [MurckoScaffold.MurckoScaffoldSmiles(mol=Chem.MolFromSmiles(s), includeChirality=False) for s in smiles]
    a = scaffold_split(smiles, (0.8, 0.1, 0.1), seed=0)
    b = scaffold_split(smiles, (0.8, 0.1, 0.1), seed=0)
    c = scaffold_split(smiles, (0.8, 0.1, 0.1), seed=1)
    assert a == b
    assert a != c
    for split in (a, c):
        _check_partition(split, n)
        part_of = {}
        for name, part in zip(("train", "valid", "test"), split):
            for i in part:
                part_of[i] = name
        by_scaffold = {}
        for i, scaffold in enumerate(scaffold_of):
            by_scaffold.setdefault(scaffold, set()).add(part_of[i])
        assert all(len(parts) == 1 for parts in by_scaffold.values())
        assert len(split.train) <= round(0.8 * n)
        assert len(split.valid) > 0 and len(split.test) > 0


def test_scaffold_split_hand_computed():
    # two benzene derivatives share a scaffold, cyclopropane has its own, ethanol has none
    s = scaffold_split(["c1ccccc1C", "C1CC1C", "c1ccccc1O", "CCO"], (0.5, 0.25, 0.25))
    _check_partition(s, 4)
    assert sorted(s.train) == [0, 2]


# --------------------------------------------------------------------------------------------
# FreeSolv
# --------------------------------------------------------------------------------------------
def test_freesolv_table(freesolv_frame):
    df = freesolv_frame
    assert len(df) == 642
    assert {"smiles", FREESOLV_TARGET}.issubset(df.columns)
    assert FREESOLV_TARGET == "expt"
    assert df["expt"].notna().all()
    assert df["expt"].between(-30.0, 5.0).all()
    assert df["smiles"].map(lambda s: Chem.MolFromSmiles(s) is not None).all()
    assert freesolv_path().exists()


def test_freesolv_dataset(freesolv_frame, tmp_path):
    ds = freesolv(as_dataset=True, progress=False, cache_dir=tmp_path)
    assert len(ds) == 642 and ds.report.num_skipped == 0 and len(ds.report) == 0
    assert ds.target_names == ["expt"]
    labels = torch.stack([ds[i][2] for i in range(0, 642, 37)])
    expected = torch.tensor(freesolv_frame["expt"].to_numpy()[0:642:37], dtype=torch.float32)
    assert torch.allclose(labels[:, 0], expected)
    for i in (0, 100, 641):
        mol = Chem.MolFromSmiles(freesolv_frame["smiles"][i])
        assert _atomic_numbers(ds[i][0]) == [a.GetAtomicNum() for a in mol.GetAtoms()]


def test_training_data_has_the_atom_budget_prediction_has(tmp_path):
    """``train`` on a file holding one 10,000-atom SMILES showed nothing for 5 minutes at 2.9 GB
    (prediction had a budget, training none): such a molecule is now left out before its relation
    graph is built and reported with its row; ``data.max_atoms`` sets the budget, which leaves out
    exactly the molecules RDKit counts more heavy atoms in."""
    from cli_runner import run_cli
    from conftest_models import freesolv_rows

    frame = freesolv_rows(0, 20)[["smiles", "expt"]]
    frame.loc[len(frame)] = ["C" * 10000, 1.0]
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    small = ["--model", "vanilla", "--epochs", "1", "--device", "cpu", "--no-progress", "--set", "model.num_layers=1",
             "model.hidden_dim=16", "model.num_heads=2"]
    code, _, err = run_cli(["train", data, "--targets", "expt", "--out", tmp_path / "run", *small])
    assert code == 0, err
    report = pd.read_csv(tmp_path / "run" / "input_report.csv")
    assert report["row"].tolist() == [20] and "10000 atoms, above the budget of 1000" in report["reason"][0]
    code, _, err = run_cli(["train", data, "--targets", "expt", "--out", tmp_path / "budget", *small, "data.max_atoms=8"])
    assert code == 0, err
    heavy = [Chem.MolFromSmiles(s).GetNumAtoms() for s in frame["smiles"][:-1]] + [10000]  # RDKit 2023 takes minutes on the chain
    left_out = pd.read_csv(tmp_path / "budget" / "input_report.csv")
    assert left_out["row"].tolist() == [row for row, count in enumerate(heavy) if count > 8]
    assert all("above the budget of 8" in reason for reason in left_out["reason"])
