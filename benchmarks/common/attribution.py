"""Atom attributions scored against a known truth: Crippen logP, whose per-atom contributions RDKit
gives, and the rank correlation between an explanation and them, molecule by molecule.

Not part of the package; imported by ``benchmarks/checks/explain_faithfulness.py`` and by the test
of explanations' faithfulness (``tests/inference/test_explain.py``).
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdMolDescriptors
from scipy.stats import spearmanr


def crippen_atom_logp(smiles: str) -> np.ndarray:
    """Wildman-Crippen logP contribution of each heavy atom of ``smiles`` (atom order of the SMILES),
    its hydrogens' contributions added to it: the values sum to ``Crippen.MolLogP``."""
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    contributions = [logp for logp, _ in rdMolDescriptors._CalcCrippenContribs(mol)]
    heavy = np.zeros(sum(atom.GetAtomicNum() != 1 for atom in mol.GetAtoms()))
    for atom, value in zip(mol.GetAtoms(), contributions):
        owner = atom.GetNeighbors()[0].GetIdx() if atom.GetAtomicNum() == 1 and atom.GetDegree() else atom.GetIdx()
        heavy[owner] += value
    return heavy


def per_molecule_spearman(explained: Iterable[Optional[Sequence[float]]], truth: Iterable[Sequence[float]]) -> np.ndarray:
    """Spearman's rank correlation of each molecule's explanation with its true contributions; NaN
    where either is constant (one heavy atom, or all alike) or the explanation is missing."""
    out = []
    for found, true in zip(explained, truth):
        found_values, true_values = (None if found is None else np.asarray(found, float)), np.asarray(true, float)
        if found_values is None or len(true_values) < 2 or np.ptp(found_values) == 0 or np.ptp(true_values) == 0:
            out.append(np.nan)
            continue
        out.append(float(spearmanr(found_values, true_values).statistic))
    return np.asarray(out)


def summary(rho: np.ndarray) -> Dict[str, float]:
    """Mean and median of the defined correlations, the share of them >= 0.7, and their count."""
    defined = rho[np.isfinite(rho)]
    return {"mean": float(defined.mean()), "median": float(np.median(defined)), "share_ge_0.7": float((defined >= 0.7).mean()),
            "molecules": int(len(defined))}


def random_explanations(truth: Sequence[Sequence[float]], seed: int = 0) -> List[np.ndarray]:
    """A Gaussian draw per atom: what an explanation that knows nothing scores."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(len(t)) for t in truth]
