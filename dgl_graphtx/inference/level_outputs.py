"""Atom- and bond-level predictions of a model with such targets (:mod:`~dgl_graphtx.models.levels`):
one batch's outputs split per molecule, mapped to the input's atoms and bonds, and the columns,
long tables and SD file they give.

A prediction table gets, per atom target ``t``, the column ``t_atoms``: the list of the predicted
values in the order of the input's atoms (as written in the SMILES, or in the SD record); per bond
target, ``t_bonds`` in the order of the input's bonds. :func:`level_tables` turns them into long
tables (one row per atom: ``row``, the carried ids, ``smiles``, ``atom``, ``element``,
``<t>_pred``; one per bond: ``bond``, ``begin_atom``, ``end_atom``), and :func:`write_level_sdf`
writes the molecules with them as SD properties (``<t>_pred`` for molecule targets,
``atom.dprop.<t>_pred`` and ``bond.dprop.<t>_pred`` lists, read back by RDKit and by this library).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import torch
from rdkit import Chem

from ..atomic_io import atomic_path
from ..datasets.level_targets import LevelTargets
from ..errors import ConfigError
from ..featurize import FeaturizerConfig
from ..featurize.molecule import MoleculeLike, prepare_input, to_mol
from ..models import MoleculeModel
from ..models.levels import bond_ends
from ..nn.graph_tensors import GraphLike
from ..training.outputs import prediction_column

PathLike = Union[str, Path]
#: Significant digits of the values written to a table (float32's).
DIGITS = 7


def level_column(name: str, level: str) -> str:
    """The list column of an atom or bond target's predictions.

    Example:
        >>> level_column("q", "atom"), level_column("order", "bond")
        ('q_atoms', 'order_bonds')
    """
    return f"{name}_{level}s"


class MoleculeLevels(NamedTuple):
    """One molecule's atom and bond outputs in target units, in the graph's order, with the input
    atom of each node (-1: a hydrogen the featurizer added) and the input atoms each bond joins."""

    atoms: Optional[np.ndarray]
    input_atom: np.ndarray
    bonds: Optional[np.ndarray]
    bond_atoms: np.ndarray


@torch.no_grad()
def level_batch(model: MoleculeModel, graph: GraphLike, relation_graph: GraphLike) -> Tuple[np.ndarray, List[MoleculeLevels]]:
    """A batch's molecule-level predictions ``[B, W]`` (target units) and each molecule's
    :class:`MoleculeLevels`, in eval mode."""
    heads = model.levels
    assert heads is not None, "only a model with atom- or bond-level targets has level outputs"
    with model.eval_mode():
        outputs = model(graph, relation_graph, levels=True)
    counts = graph.batch_num_nodes().cpu().tolist()
    input_atom = graph.ndata["input_atom"].cpu()
    atoms = None if outputs.atoms is None else heads.to_target_space("atom", outputs.atoms).double().cpu()
    first, second = (t.cpu() for t in bond_ends(graph))
    bond_counts = torch.bincount(torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))[first],
                                 minlength=len(counts)).tolist()
    bonds = None if outputs.bonds is None else heads.to_target_space("bond", outputs.bonds).double().cpu()
    ends = torch.stack([input_atom[first], input_atom[second]], dim=1)
    parts = zip(_split(atoms, counts), torch.split(input_atom, counts), _split(bonds, bond_counts), torch.split(ends, bond_counts))
    per_molecule = [MoleculeLevels(nodes, node_atom.numpy(), edges, edge_ends.numpy()) for nodes, node_atom, edges, edge_ends in parts]
    return model.to_target_space(outputs.molecules).double().cpu().numpy(), per_molecule


def _split(values: Optional[torch.Tensor], counts: List[int]) -> List[Optional[np.ndarray]]:
    if values is None:
        return [None] * len(counts)
    return [part.numpy() for part in torch.split(values, counts)]


def in_input_order(found: MoleculeLevels, molecule: MoleculeLike) -> Dict[str, Optional[np.ndarray]]:
    """One molecule's atom values ``[n_atoms, A]`` and bond values ``[n_bonds, C]`` in the order of
    the input's atoms and bonds (``molecule`` as the featurizer took it; values of hydrogens the
    featurizer added are left out)."""
    mol = to_mol(molecule)
    out: Dict[str, Optional[np.ndarray]] = {"atom": None, "bond": None}
    if found.atoms is not None:
        values = np.full((mol.GetNumAtoms(), found.atoms.shape[1]), np.nan)
        known = found.input_atom >= 0
        values[found.input_atom[known]] = found.atoms[known]
        out["atom"] = values
    if found.bonds is not None:
        values = np.full((mol.GetNumBonds(), found.bonds.shape[1]), np.nan)
        for (a, b), value in zip(found.bond_atoms.tolist(), found.bonds):
            bond = mol.GetBondBetweenAtoms(a, b) if a >= 0 and b >= 0 else None
            if bond is not None:
                values[bond.GetIdx()] = value
        out["bond"] = values
    return out


def _target_values(found: Optional[Dict[str, Optional[np.ndarray]]], level: str, target: int) -> Optional[List[float]]:
    """One row's values of one atom or bond target, rounded (``None`` when not predicted)."""
    values = None if found is None else found[level]
    return None if values is None else [float(f"{v:.{DIGITS}g}") for v in values[:, target]]


def add_level_columns(table: pd.DataFrame, spec: LevelTargets, found: Sequence[Optional[Dict[str, Optional[np.ndarray]]]]) -> None:
    """Insert the list column of every atom and bond target (:func:`level_column`) before the
    ``error`` column of a prediction table, one entry per row (``None``: not predicted).

    Example:
        >>> table = pd.DataFrame({"smiles": ["CO"], "error": [None]})
        >>> add_level_columns(table, LevelTargets(("q",)), [{"atom": np.array([[0.25], [-0.25]]), "bond": None}])
        >>> table.columns.tolist(), table["q_atoms"][0]
        (['smiles', 'q_atoms', 'error'], [0.25, -0.25])
    """
    at = table.columns.get_loc("error")
    assert isinstance(at, int)  # one column of that name
    for level, names in (("atom", spec.atom_targets), ("bond", spec.bond_targets)):
        for t, name in enumerate(names):
            table.insert(at, level_column(name, level), [_target_values(f, level, t) for f in found])
            at += 1


class LevelPredictions(NamedTuple):
    """What :meth:`~dgl_graphtx.inference.Predictor.predict_atoms` returns.

    Attributes:
        table: the prediction table, with a list column per atom and bond target.
        atoms: one row per atom of every predicted molecule: ``row`` (of the input: its label in
            ``table``'s index, which a pandas Series input keeps), the carried
            columns, ``smiles``, ``atom`` (index in the input), ``element``, ``<t>_pred`` per atom target.
        bonds: one row per bond: ``row``, the carried columns, ``smiles``, ``bond`` (index in the
            input), ``begin_atom``, ``end_atom``, ``<t>_pred`` per bond target.
    """

    table: pd.DataFrame
    atoms: pd.DataFrame
    bonds: pd.DataFrame


def level_tables(table: pd.DataFrame, molecules: Sequence[MoleculeLike], spec: LevelTargets, featurizer: FeaturizerConfig,
                 carried: Sequence[str] = (), start: int = 0) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """The long atom and bond tables of :class:`LevelPredictions` from a prediction table with its
    level columns and its inputs (rows numbered from ``start``; ``carried``: the columns of the
    table copied to every atom and bond row).

    Example:
        >>> table = pd.DataFrame({"smiles": ["OC"], "q_atoms": [[-0.4, 0.1]], "order_bonds": [[1.2]]})
        >>> atoms, bonds = level_tables(table, ["OC"], LevelTargets(("q",), ("order",)), FeaturizerConfig())
        >>> atoms.values.tolist(), bonds.values.tolist()
        ([[0, 'OC', 0, 'O', -0.4], [0, 'OC', 1, 'C', 0.1]], [[0, 'OC', 0, 0, 1, 1.2]])
    """
    atom_rows: List[list] = []
    bond_rows: List[list] = []
    for row, molecule in enumerate(molecules):
        columns = {level: [table[level_column(n, level)].iloc[row] for n in names]
                   for level, names in (("atom", spec.atom_targets), ("bond", spec.bond_targets))}
        if all(values is None for found in columns.values() for values in found) or not any(columns.values()):
            continue
        mol = to_mol(prepare_input(molecule, featurizer))
        ids = [table[c].iloc[row] for c in carried] + [table["smiles"].iloc[row]]
        if spec.atom_targets:
            atom_rows += [[start + row, *ids, atom.GetIdx(), atom.GetSymbol(), *(v[atom.GetIdx()] for v in columns["atom"])]
                          for atom in mol.GetAtoms()]
        if spec.bond_targets:
            bond_rows += [[start + row, *ids, bond.GetIdx(), bond.GetBeginAtomIdx(), bond.GetEndAtomIdx(),
                           *(v[bond.GetIdx()] for v in columns["bond"])] for bond in mol.GetBonds()]
    head = ["row", *carried, "smiles"]
    return (pd.DataFrame(atom_rows, columns=[*head, "atom", "element", *map(prediction_column, spec.atom_targets)]),
            pd.DataFrame(bond_rows, columns=[*head, "bond", "begin_atom", "end_atom", *map(prediction_column, spec.bond_targets)]))


def _property_list(values: Sequence[float]) -> str:
    """An SD property list (RDKit's ``atom.dprop`` form: values separated by spaces, ``n/a`` missing)."""
    return " ".join("n/a" if not np.isfinite(v) else f"{v:.{DIGITS}g}" for v in values)


def write_level_sdf(path: PathLike, table: pd.DataFrame, molecules: Sequence[MoleculeLike], spec: LevelTargets,
                    featurizer: FeaturizerConfig, targets: Sequence[str] = ()) -> Path:
    """Write the predicted molecules of a prediction table (rows without an ``error``) to an SDF
    (atomically): each record the molecule as predicted (its coordinates when it had some), its
    title the ``name`` or ``smiles``, SD properties ``<t>_pred`` for the molecule ``targets``, and
    ``atom.dprop.<t>_pred`` / ``bond.dprop.<t>_pred`` lists in the order of its atoms and bonds.

    Example:
        >>> import tempfile
        >>> table = pd.DataFrame({"smiles": ["OC"], "y_pred": [1.5], "q_atoms": [[-0.4, 0.1]], "error": [None]})
        >>> out = write_level_sdf(tempfile.mkdtemp() + "/p.sdf", table, ["OC"], LevelTargets(("q",)), FeaturizerConfig(), ["y"])
        >>> mol = Chem.SDMolSupplier(str(out))[0]
        >>> [a.GetDoubleProp("q_pred") for a in mol.GetAtoms()], mol.GetDoubleProp("y_pred")
        ([-0.4, 0.1], 1.5)
    """
    if Path(path).suffix.lower() != ".sdf":
        raise ConfigError(f"--sdf-output must end in .sdf, got {path}")
    with atomic_path(path) as temporary:
        writer = Chem.SDWriter(str(temporary))
        for row, molecule in enumerate(molecules):
            if table["error"].iloc[row] is not None and not pd.isna(table["error"].iloc[row]):
                continue
            mol = Chem.Mol(to_mol(prepare_input(molecule, featurizer)))
            mol.SetProp("_Name", str(table["name"].iloc[row] if "name" in table and table["name"].iloc[row] else table["smiles"].iloc[row]))
            for name in targets:
                mol.SetDoubleProp(prediction_column(name), float(table[prediction_column(name)].iloc[row]))
            for level, names in (("atom", spec.atom_targets), ("bond", spec.bond_targets)):
                for name in names:
                    values = table[level_column(name, level)].iloc[row]
                    if values is not None:
                        mol.SetProp(f"{level}.dprop.{prediction_column(name)}", _property_list(values))
            writer.write(mol)
        writer.close()
    return Path(path)
