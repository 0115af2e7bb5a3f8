"""Rows of several molecules read from a table's columns: reactions as their two sides, mixture
weights per molecule, the dataset's graphs holding each row's molecules, and one-line errors."""
from __future__ import annotations

import pytest
import torch

from dgl_graphtx.datasets import example_sdf_path, load_labelled, read_molecules
from dgl_graphtx.datasets.molecule_columns import MoleculeColumns
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import MoleculeFeaturizer


def test_rows_of_molecules_and_reactions_are_read_in_column_order(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("solvent,rxn,y\nO,CC(=O)O.OCC>>CC(=O)OCC.O,1.0\nCCO,C=C>>CC,2.0\n")
    table = MoleculeColumns(("solvent", "rxn"), ("rxn",)).read(read_molecules(path, "solvent"))
    assert table.molecules == [("O", "CC(=O)O.OCC", "CC(=O)OCC.O"), ("CCO", "C=C", "CC")]
    assert table.identifiers == ["O.CC(=O)O.OCC.CC(=O)OCC.O", "CCO.C=C.CC"]
    assert MoleculeColumns(("solvent", "rxn"), ("rxn",)).names == ["solvent", "rxn reactants", "rxn products"]


def test_the_dataset_of_rows_holds_each_molecule_as_featurized_alone(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("solute,solvent,x1,x2,y\nCCO,O,0.25,0.75,1.0\nC1CC,O,0.5,0.5,2.0\nc1ccccc1,ClC(Cl)Cl,1,0,3.0\n")
    columns = MoleculeColumns(("solute", "solvent"), mixture_weights=("x1", "x2"))
    ds, _ = load_labelled(path, ["y"], molecule_columns=columns, progress=False)
    assert ds.rows.tolist() == [0, 2] and ds.molecules_per_row == 2 and ds.molecule_columns == columns
    assert "molecule 1 of the row: SMILES syntax error" in ds.report.skipped[0].reason
    graph, _, labels, _ = ds[1]
    alone = [MoleculeFeaturizer()(s)[0] for s in ("c1ccccc1", "ClC(Cl)Cl")]
    assert torch.equal(graph.ndata["feat"], torch.cat([g.ndata["feat"] for g in alone]))
    assert graph.ndata["row_molecule"].tolist() == [0] * 6 + [1] * 4 and labels.tolist() == [3.0]
    assert graph.ndata["mixture_weights"].tolist() == [[1.0, 0.0]] * 10
    batch = ds.__getitems__([1, 0])
    assert batch.batch_size == 2 and batch.graph.batch_num_nodes().tolist() == [10, 4]


def test_mistakes_in_the_columns_are_one_line_errors(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("rxn,w,y\nCCO>>CC=O,0.5,1\nCCO,x,2\n")
    with pytest.raises(ConfigError, match=r"^row 1 of .*r.csv: reaction column 'rxn' holds 'CCO', which has no '>>'"):
        load_labelled(path, ["y"], molecule_columns=MoleculeColumns(reaction_cols=("rxn",)), progress=False)
    path.write_text("rxn,y\nCCO>O>CC=O,1\n")
    with pytest.raises(ConfigError, match="holds agents \\('O'\\) between '>' and '>'"):
        load_labelled(path, ["y"], molecule_columns=MoleculeColumns(reaction_cols=("rxn",)), progress=False)
    path.write_text("a,b,wa,wb,y\nC,O,0.5,x,1\n")
    with pytest.raises(ConfigError, match=r"row 0 of .* \(C\.O\): mixture weight column 'wb' holds 'x'"):
        load_labelled(path, ["y"], molecule_columns=MoleculeColumns(("a", "b"), mixture_weights=("wa", "wb")), progress=False)
    with pytest.raises(ConfigError, match="column 'c' not in"):
        load_labelled(path, ["y"], molecule_columns=MoleculeColumns(("a", "c")), progress=False)
    with pytest.raises(ConfigError, match="reaction column\\(s\\) \\['r'\\] .* are not among the molecule columns"):
        MoleculeColumns(("a", "b"), ("r",))
    with pytest.raises(ConfigError, match="read from the columns of a CSV/TSV table; .* is an SDF file"):
        MoleculeColumns(("a", "b")).read(read_molecules(example_sdf_path()))


def test_one_molecule_per_row_reads_the_table_unchanged(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("smiles,y\nCCO,1\n")
    table = read_molecules(path)
    assert MoleculeColumns().read(table) is table and MoleculeColumns().weights(None, ["CCO"]) is None
    assert MoleculeColumns(("smiles",)).read(table).molecules == ["CCO"]
