"""Atom- and bond-level labels read from files land on the right nodes and bonds.

References are RDKit's own values (Gasteiger group charges, bond orders) computed on the molecule
rebuilt from its canonical SMILES, whose atom and bond order is the graph's: nothing of the
library's ``input_atom`` map goes into them. Every writing of a molecule (random atom orders,
atom-map numbers, an SD record with hydrogens) must give the same labels on the same nodes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from rdkit import Chem
from rdkit.Chem import AllChem

from dgl_graphtx.datasets import load_labelled
from dgl_graphtx.datasets.level_targets import LevelTargets, parse_values, read_level_labels
from dgl_graphtx.datasets.readers import read_molecules
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import FeaturizerConfig

MOLECULES = ["CC(=O)Nc1ccc(O)cc1", "CC(=O)[O-]", "C[N+](C)(C)C", "OCC(Cl)C#N", "c1ccncc1"]


def group_charges(mol: Chem.Mol) -> np.ndarray:
    """Gasteiger charges with each atom's implicit hydrogens added: they sum to the formal charge."""
    AllChem.ComputeGasteigerCharges(mol)
    return np.array([a.GetDoubleProp("_GasteigerCharge") + a.GetDoubleProp("_GasteigerHCharge") for a in mol.GetAtoms()])


def canonical(smiles: str) -> Chem.Mol:
    """The molecule in the graph's atom and bond order (rebuilt from its canonical SMILES)."""
    return Chem.MolFromSmiles(Chem.MolToSmiles(Chem.MolFromSmiles(smiles)))


def _cell(values) -> str:
    return "[" + ", ".join(f"{v:.6f}" for v in values) + "]"


def _labels(ds, key, level="atom"):
    graphs = ds.graphs
    values = graphs.ndata[key] if level == "atom" else graphs.edata[key]
    offsets, counts = (graphs.node_offsets, graphs.num_nodes) if level == "atom" else (graphs.edge_offsets, graphs.num_edges)
    return [values[int(o):int(o) + int(c)] for o, c in zip(offsets, counts)]


def test_lists_in_any_atom_order_give_every_node_its_own_value(tmp_path):
    """Five random writings of each molecule, each with its list in the order of its own SMILES."""
    rows = []
    for smiles in MOLECULES:
        for writing in Chem.MolToRandomSmilesVect(Chem.MolFromSmiles(smiles), 5, randomSeed=7):
            mol = Chem.MolFromSmiles(writing)
            orders = [b.GetBondTypeAsDouble() for b in mol.GetBonds()]
            rows.append({"smiles": writing, "q": _cell(group_charges(mol)), "order": _cell(orders), "name": smiles})
    pd.DataFrame(rows).to_csv(tmp_path / "q.csv", index=False)
    ds, _ = load_labelled(tmp_path / "q.csv", [], level_targets=LevelTargets(("q",), ("order",)), progress=False)
    for row, atoms, bonds in zip(rows, _labels(ds, "atom_targets"), _labels(ds, "bond_targets", "bond")):
        reference = canonical(row["name"])
        assert np.allclose(atoms[:, 0].numpy(), group_charges(reference), atol=1e-5)
        expected = [b.GetBondTypeAsDouble() for b in reference.GetBonds() for _ in range(2)]  # edges 2i, 2i+1: bond i
        assert bonds[:, 0].tolist() == expected


def test_atom_map_numbers_name_the_atoms(tmp_path):
    rows = []
    for smiles in MOLECULES:
        mol = Chem.MolFromSmiles(smiles)
        maps = np.random.default_rng(len(smiles)).permutation(mol.GetNumAtoms()) + 1
        for atom, number in zip(mol.GetAtoms(), maps.tolist()):
            atom.SetAtomMapNum(number)
        charges = group_charges(Chem.Mol(mol))
        by_map = np.empty(len(maps))
        by_map[maps - 1] = charges  # value m for the atom mapped m + 1
        rows.append({"smiles": Chem.MolToSmiles(mol, canonical=False), "q": _cell(by_map)})
    pd.DataFrame(rows).to_csv(tmp_path / "m.csv", index=False)
    ds, _ = load_labelled(tmp_path / "m.csv", [], level_targets=LevelTargets(("q",), atom_index="map"), progress=False)
    for row, atoms in zip(rows, _labels(ds, "atom_targets")):
        reference = Chem.MolFromSmiles(Chem.MolToSmiles(Chem.MolFromSmiles(row["smiles"])))  # maps kept: the graph's order
        assert np.allclose(atoms[:, 0].numpy(), group_charges(reference), atol=1e-5)


def _sdf_with_lists(path, smiles_list, lengths=None):
    writer = Chem.SDWriter(str(path))
    for index, smiles in enumerate(smiles_list):
        mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
        AllChem.EmbedMolecule(mol, randomSeed=1)
        AllChem.ComputeGasteigerCharges(mol)
        charges = [a.GetDoubleProp("_GasteigerCharge") for a in mol.GetAtoms()]
        if lengths is not None:
            charges = charges[:lengths[index]]
        mol.SetProp("atom.dprop.q", " ".join(f"{q:.6f}" for q in charges))
        mol.SetProp("bond.dprop.order", " ".join(f"{b.GetBondTypeAsDouble():g}" for b in mol.GetBonds()))
        writer.write(mol)
    writer.close()


def test_sd_atom_and_bond_properties_with_and_without_hydrogen_nodes(tmp_path):
    _sdf_with_lists(tmp_path / "q.sdf", MOLECULES)
    spec = LevelTargets(("q",), ("order",))
    heavy, _ = load_labelled(tmp_path / "q.sdf", [], level_targets=spec, progress=False)
    for smiles, atoms, bonds in zip(MOLECULES, _labels(heavy, "atom_targets"), _labels(heavy, "bond_targets", "bond")):
        reference = Chem.AddHs(canonical(smiles))
        AllChem.ComputeGasteigerCharges(reference)
        assert np.allclose(atoms[:, 0].numpy(), [a.GetDoubleProp("_GasteigerCharge") for a in reference.GetAtoms()
                                                 if a.GetAtomicNum() > 1], atol=1e-5)
        assert bonds[0::2, 0].tolist() == [b.GetBondTypeAsDouble() for b in canonical(smiles).GetBonds()]
    explicit, _ = load_labelled(tmp_path / "q.sdf", [], level_targets=spec, featurizer=FeaturizerConfig(explicit_hydrogens=True),
                                progress=False)
    for smiles, atoms in zip(MOLECULES, _labels(explicit, "atom_targets")):
        assert not torch.isnan(atoms).any()  # every atom of the record, hydrogens too, has its value
        assert float(atoms.sum()) == pytest.approx(Chem.GetFormalCharge(Chem.MolFromSmiles(smiles)), abs=1e-4)


def test_an_sd_list_of_the_wrong_length_names_the_record_and_both_lengths(tmp_path):
    _sdf_with_lists(tmp_path / "bad.sdf", MOLECULES[:3], lengths=[None, 4, None])
    with pytest.raises(ConfigError, match=r"row 1 of .*bad.sdf .*atom.dprop.q lists 4 values for the 7 atoms of the record"):
        read_level_labels(read_molecules(tmp_path / "bad.sdf"), LevelTargets(("q",)))


def test_a_list_of_the_wrong_length_names_the_row_and_both_lengths(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('smiles,q,order\nCCO,"[0.1, 0.2, 0.3]","1 1"\nOCC,"0.1;0.2","1 1"\n')
    with pytest.raises(ConfigError, match=r"^row 1 of .*q.csv \(OCC\): atom target 'q' lists 2 values for the 3 atoms of the molecule"):
        load_labelled(path, [], level_targets=LevelTargets(("q",)), progress=False)
    path.write_text('smiles,order\nCCO,"1 1 1"\n')
    with pytest.raises(ConfigError, match="bond target 'order' lists 3 values for the 2 bonds"):
        load_labelled(path, [], level_targets=LevelTargets(bond_targets=("order",)), progress=False)
    path.write_text('smiles,q\nCCO,"0.1 x 0.3"\n')
    with pytest.raises(ConfigError, match="row 0 of .* holds '0.1 x 0.3', which is not a list of numbers"):
        load_labelled(path, [], level_targets=LevelTargets(("q",)), progress=False)
    with pytest.raises(ConfigError, match=r"atom target column\(s\) \['charge'\] of lists not found"):
        load_labelled(path, [], level_targets=LevelTargets(("charge",)), progress=False)


def test_missing_values_and_unreadable_rows_keep_every_label_in_its_row(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('smiles,q,y\nCCO,"[0.1, nan, 0.3]",1\nC1CC,"[1, 2]",2\nCN,,3\nOC,"[n/a, -0.5]",4\n')
    ds, _ = load_labelled(path, ["y"], level_targets=LevelTargets(("q",)), progress=False)
    assert ds.rows.tolist() == [0, 2, 3] and ds.report.num_skipped == 1
    atoms = _labels(ds, "atom_targets")
    assert torch.equal(torch.isnan(atoms[0][:, 0]), torch.tensor([False, True, False]))  # CCO: C C O, the middle one missing
    assert torch.isnan(atoms[1]).all()  # a blank cell: the molecule is unlabelled
    assert atoms[2][:, 0].tolist()[0] == pytest.approx(-0.5)  # canonical CO: C first (given second in OC)


def test_sums_are_the_formal_charge_or_a_column(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('smiles,q,total\nCC(=O)[O-],"[0, 0, -0.5, -0.5]",-1\n[NH4+],[1],\n')
    ds, _ = load_labelled(path, [], level_targets=LevelTargets(("q",), atom_sums=("q=formal_charge",)), progress=False)
    assert ds.graphs.graph_data["atom_totals"][:, 0].tolist() == [-1.0, 1.0]
    with pytest.raises(ConfigError, match=r"row 1 of .*: column 'total' holds a blank, but the atom values of 'q' must add up"):
        load_labelled(path, [], level_targets=LevelTargets(("q",), atom_sums=("q=total",)), progress=False)


def test_parse_values_reads_the_usual_list_forms():
    assert parse_values("[1, 2.5, nan]").tolist()[:2] == [1.0, 2.5]
    assert parse_values("1;2;3").tolist() == [1.0, 2.0, 3.0]
    assert parse_values("(1 2)").tolist() == [1.0, 2.0]
    assert np.isnan(parse_values("NA None")).all()
    with pytest.raises(ValueError):
        parse_values("[1, two]")
