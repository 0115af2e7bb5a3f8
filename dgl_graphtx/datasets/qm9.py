"""QM9 with its DFT geometries (Ramakrishnan et al. 2014), read from the ``qm9pack`` package.

Install with ``pip install "dgl_graphtx[qm9]"``. ``qm9pack`` (MIT, by R. Ramakrishnan) ships the
130,831 molecules of QM9 that passed the original consistency check, each with its SMILES, its
B3LYP/6-31G(2df,p) geometry (hydrogens included) and the 12 standard targets. Molecules are built
from the geometry: RDKit perceives the bonds (``rdDetermineBonds``, total charge 0), and the result
is checked against the given SMILES.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
from rdkit import Chem, rdBase

from ..errors import ConfigError, GraphTxError
from ..featurize import FeaturizerConfig
from ..featurize.molecule import RejectedMolecule
from .geometry import COVALENT_FACTOR, molecule_from_geometry
from .molecule_dataset import MoleculeDataset

#: Hartree in electronvolts (CODATA 2018).
HARTREE_TO_EV = 27.211386245988
#: Hartree in kcal/mol (CODATA 2018; 1 kcal = 4.184 kJ).
HARTREE_TO_KCAL = 627.5094740631
#: U0 of the free atoms (Hartree, same B3LYP/6-31G(2df,p) level), from QM9's ``atomref.txt``.
ATOM_U0 = {"H": -0.500273, "C": -37.846772, "N": -54.583861, "O": -75.064579, "F": -99.718730}
#: Bump when the way molecules are built from the geometries changes (it keys the dataset cache).
PERCEPTION_VERSION = 1

_PARTS = ("qm9_part1.csv", "qm9_part2.csv", "qm9_part3.csv")


@dataclass(frozen=True)
class QM9Target:
    """One QM9 target: its name here, its column in ``qm9pack``, its unit and meaning; an
    ``atomization`` energy is the column minus the free atoms' energies (:data:`ATOM_U0`)."""

    name: str
    column: str
    unit: str
    description: str
    atomization: bool = False


#: The 12 standard targets (units as computed by Ramakrishnan et al.) and the orbital energies in eV.
QM9_TARGETS: Dict[str, QM9Target] = {t.name: t for t in [
    QM9Target("mu", "Dipole_debye", "D", "dipole moment"),
    QM9Target("alpha", "Polarizability_bohr3", "bohr^3", "isotropic polarizability"),
    QM9Target("homo", "HOMO_au", "Ha", "energy of the highest occupied molecular orbital"),
    QM9Target("lumo", "LUMO_au", "Ha", "energy of the lowest unoccupied molecular orbital"),
    QM9Target("gap", "HOMO_LUMO_gap_au", "Ha", "HOMO-LUMO gap"),
    QM9Target("r2", "R2_bohr2", "bohr^2", "electronic spatial extent <R^2>"),
    QM9Target("zpve", "ZPVE_au", "Ha", "zero-point vibrational energy"),
    QM9Target("u0", "InternalEnergy_0K_au", "Ha", "internal energy at 0 K"),
    QM9Target("u298", "InternalEnergy_298K_au", "Ha", "internal energy at 298.15 K"),
    QM9Target("h298", "Enthalphy_298K_au", "Ha", "enthalpy at 298.15 K"),
    QM9Target("g298", "GibbsFreeEnergy_298K_au", "Ha", "Gibbs free energy at 298.15 K"),
    QM9Target("cv", "Heatcapacity_Cv_cal_mol_K", "cal/(mol K)", "heat capacity at 298.15 K"),
    QM9Target("homo_ev", "HOMO_au", "eV", "HOMO energy in eV (homo x 27.211386)"),
    QM9Target("lumo_ev", "LUMO_au", "eV", "LUMO energy in eV (lumo x 27.211386)"),
    QM9Target("gap_ev", "HOMO_LUMO_gap_au", "eV", "HOMO-LUMO gap in eV (gap x 27.211386)"),
    QM9Target("u0_atom", "InternalEnergy_0K_au", "kcal/mol",
              "atomization energy at 0 K in kcal/mol: u0 minus the free atoms' U0 (QM9's atomref), x 627.509",
              atomization=True),
]}
#: Unit conversions from the Hartree of qm9pack's energy columns.
_FROM_HARTREE = {"eV": HARTREE_TO_EV, "kcal/mol": HARTREE_TO_KCAL}
#: The targets of the Uni-Mol / MoiréGT QM9 benchmark.
QM9_ORBITAL_TARGETS = ("homo", "lumo", "gap")


def qm9_data_dir() -> Path:
    """The folder of ``qm9pack``'s CSV files (found without importing ``qm9pack``).

    Raises :class:`GraphTxError` naming the install command when ``qm9pack`` is missing.
    """
    spec = importlib.util.find_spec("qm9pack")
    if spec is None or not spec.submodule_search_locations:
        raise GraphTxError('QM9 needs the qm9pack package (~100 MB of data): pip install "dgl_graphtx[qm9]"')
    folder = Path(list(spec.submodule_search_locations)[0]) / "data"
    missing = [name for name in _PARTS if not (folder / name).is_file()]
    if missing:
        raise GraphTxError(f"qm9pack at {folder.parent} lacks {missing}; reinstall it: pip install --force-reinstall qm9pack")
    return folder


def _read_table() -> pd.DataFrame:
    folder = qm9_data_dir()
    columns = ["Index", "SMILES", "InChi", "N_atoms", "Elements", "XYZ_Ang"]
    columns += sorted({t.column for t in QM9_TARGETS.values()})
    frame = pd.concat([pd.read_csv(folder / name, usecols=columns) for name in _PARTS], ignore_index=True)
    table = pd.DataFrame({
        "qm9_id": frame["Index"].astype(np.int64), "smiles": frame["SMILES"].astype(str),
        "inchi": frame["InChi"], "num_atoms": frame["N_atoms"].astype(np.int64),
        "elements": frame["Elements"], "xyz": frame["XYZ_Ang"],
    })
    atoms_u0 = frame["Elements"].map(lambda text: sum(ATOM_U0[s] for s in parse_elements(text)))
    for target in QM9_TARGETS.values():
        values = frame[target.column].astype(np.float64)
        if target.atomization:
            values = values - atoms_u0
        table[target.name] = values * _FROM_HARTREE.get(target.unit, 1.0)
    return table


def _data_fingerprint() -> str:
    """qm9pack's version and the size of its data files (what determines the table)."""
    folder = qm9_data_dir()
    sizes = [(folder / name).stat().st_size for name in _PARTS]
    return f"qm9pack {importlib.metadata.version('qm9pack')} {sizes}"


def qm9(
    as_dataset: bool = False,
    targets: Sequence[str] = QM9_ORBITAL_TARGETS,
    *,
    subset: Optional[int] = None,
    seed: int = 0,
    ids: Optional[Sequence[int]] = None,
    check_smiles: bool = True,
    **dataset_kwargs: Any,
) -> Union[pd.DataFrame, MoleculeDataset]:
    """QM9 (Ramakrishnan et al., *Sci. Data* 1, 140022, 2014) from ``qm9pack``: 130,831 molecules
    with DFT (B3LYP/6-31G(2df,p)) geometries and 12 targets.

    The table has one row per molecule: ``qm9_id`` (the number of the original
    ``dsgdb9nsd_NNNNNN.xyz`` file), ``smiles``, ``inchi``, ``num_atoms`` (hydrogens included),
    ``elements`` and ``xyz`` (the geometry in Angstrom, as text; see :func:`parse_geometry`), and
    one column per target of :data:`QM9_TARGETS` (units there: energies in Hartree, ``*_ev`` in eV,
    the atomization energy ``u0_atom`` in kcal/mol).

    With ``as_dataset=True`` each molecule is built from its geometry by
    :func:`molecule_from_geometry` (RDKit bond perception, charge 0) and compared with the given
    SMILES (:func:`geometry_disagreement`). Molecules whose bonds cannot be perceived, or whose
    perceived structure differs from the SMILES (with ``check_smiles``), are left out and recorded
    with the reason in ``dataset.report``. Stereo centres are assigned from the geometry (QM9's
    SMILES mostly carry none). Graphs have heavy atoms only unless the featurizer has
    ``explicit_hydrogens=True``; ``ndata["pos"]`` holds the DFT coordinates unless the featurizer's
    ``coordinates`` is ``"none"`` (``"etkdg"`` is refused: QM9 has its own geometries). Row ``i`` of
    the dataset is row ``dataset.rows[i]`` of the table returned for the same ``subset``/``seed``
    (or ``ids``).

    Args:
        as_dataset: return a :class:`MoleculeDataset` instead of the table.
        targets: target names (keys of :data:`QM9_TARGETS`) of the dataset.
        subset: keep this many molecules, drawn at random with ``seed`` (in QM9 order).
        seed: seed of the ``subset`` draw.
        ids: keep the molecules with these ``qm9_id`` numbers, in this order (instead of ``subset``).
        check_smiles: leave out molecules whose perceived structure differs from the SMILES.
        **dataset_kwargs: passed to :class:`MoleculeDataset` (``featurizer``, ``relation``,
            ``cache_dir``, ``progress``, ``strict``). The default featurizer keeps the DFT
            coordinates (``FeaturizerConfig(coordinates="conformer")``).

    Example:
        >>> table = qm9(subset=3, seed=1)
        >>> for row in table[["qm9_id", "smiles", "homo", "homo_ev"]].round(3).values.tolist():
        ...     print(row)
        [63569, 'CC1(O)CC11CNC1=O', -0.24, -6.525]
        [68642, 'CC12CC(OC1=N)C=C2', -0.25, -6.814]
        [100791, 'COC(C)C(C)N1CC1', -0.231, -6.286]
        >>> ds = qm9(as_dataset=True, subset=3, seed=1, progress=False)
        >>> ds[0][0].ndata["pos"].shape, ds.target_names
        (torch.Size([9, 3]), ['homo', 'lumo', 'gap'])
    """
    if as_dataset:
        unknown = [t for t in targets if t not in QM9_TARGETS]
        if unknown or not targets:
            raise ConfigError(f"unknown QM9 target(s) {unknown or list(targets)}; choose from {list(QM9_TARGETS)}")
        featurizer = dataset_kwargs.setdefault("featurizer", FeaturizerConfig(coordinates="conformer"))
        if featurizer.coordinates == "etkdg":
            raise ConfigError("QM9 ships DFT geometries: use coordinates='conformer' (or 'auto', or 'none'), not 'etkdg'")
    table = _read_table()
    if ids is not None:
        if subset is not None:
            raise ConfigError("give either subset or ids, not both")
        rows = pd.Index(table["qm9_id"]).get_indexer(np.asarray(ids, dtype=np.int64))
        if (rows < 0).any():
            unknown = np.asarray(ids)[rows < 0]
            raise ConfigError(f"{len(unknown)} qm9_id(s) not in QM9 (first: {unknown[:5].tolist()}); ids run from 1 to 133885 with gaps")
        table = table.iloc[rows].reset_index(drop=True)
    elif subset is not None:
        if not 0 < subset <= len(table):
            raise ConfigError(f"subset must be between 1 and {len(table)}, got {subset}")
        rows = np.sort(np.random.default_rng(seed).choice(len(table), size=subset, replace=False))
        table = table.iloc[rows].reset_index(drop=True)
    if not as_dataset:
        return table
    molecules = GeometryMolecules(table, hydrogens=featurizer.explicit_hydrogens, check_smiles=check_smiles)
    digest = hashlib.sha256(table["qm9_id"].to_numpy().tobytes()).hexdigest()
    dataset_kwargs.setdefault(
        "fingerprint", f"{_data_fingerprint()}|ids {digest}|{molecules.settings}")
    return MoleculeDataset(molecules, table[list(targets)], target_names=list(targets),
                           identifiers=list(table["smiles"]), **dataset_kwargs)


def parse_elements(elements: str) -> List[str]:
    """Element symbols from ``qm9pack``'s ``Elements`` text.

    Example:
        >>> parse_elements("['O','H','H']")
        ['O', 'H', 'H']
    """
    return [s.strip().strip("'\"") for s in elements.strip("[] ").split(",")]


def parse_geometry(elements: str, xyz: str) -> Tuple[List[str], np.ndarray]:
    """Element symbols and ``[N, 3]`` coordinates (Angstrom) from ``qm9pack``'s text columns.

    Example:
        >>> symbols, coords = parse_geometry("['O','H','H']", "[[0.,0.,0.],[0.96,0.,0.],[-0.24,0.93,0.]]")
        >>> symbols, coords.shape
        (['O', 'H', 'H'], (3, 3))
    """
    symbols = parse_elements(elements)
    coords = np.array(xyz.replace("[", " ").replace("]", " ").split(","), dtype=np.float64)
    if coords.size != 3 * len(symbols):
        raise ValueError(f"{len(symbols)} elements but {coords.size} coordinate values")
    return symbols, coords.reshape(len(symbols), 3)


def _canonical(mol: Chem.Mol) -> str:
    """Canonical SMILES of ``mol`` without hydrogens or stereo."""
    plain = Chem.RemoveAllHs(mol)
    Chem.RemoveStereochemistry(plain)
    return Chem.MolToSmiles(plain)


def _skeleton(mol: Chem.Mol) -> str:
    """Canonical SMILES of ``mol``'s connectivity with each heavy atom's hydrogen count, all bonds
    single and no charges: what two resonance or charge-placement forms of a molecule share."""
    plain = Chem.RWMol(Chem.RemoveAllHs(mol))
    for atom in plain.GetAtoms():
        atom.SetNumExplicitHs(atom.GetTotalNumHs())
        atom.SetNoImplicit(True)
        atom.SetFormalCharge(0)
        atom.SetIsAromatic(False)
        atom.SetChiralTag(Chem.ChiralType.CHI_UNSPECIFIED)
    for bond in plain.GetBonds():
        bond.SetBondType(Chem.BondType.SINGLE)
        bond.SetIsAromatic(False)
        bond.SetStereo(Chem.BondStereo.STEREONONE)
    plain.UpdatePropertyCache(strict=False)
    return Chem.MolToSmiles(plain)


def geometry_disagreement(mol: Chem.Mol, smiles: str) -> Optional[str]:
    """``None`` if ``mol`` (perceived from a geometry) is the molecule of ``smiles``, else why not.

    Stereo is ignored. Two structures with the same atoms, bonds and hydrogens that differ only in
    how bond orders and formal charges are placed (resonance forms of a zwitterion, say) agree: a
    neutral DFT geometry does not decide between them.

    Example:
        >>> geometry_disagreement(Chem.MolFromSmiles("[O-]C1=C[NH+]2CCCC2=C1"), "O=C1[CH-][NH+]2CCCC2=C1") is None
        True
        >>> geometry_disagreement(Chem.MolFromSmiles("CC=O"), "C=CO")
        "bonds perceived from the DFT geometry give 'CC=O', not the given SMILES 'C=CO'"
    """
    given = Chem.MolFromSmiles(smiles)
    if given is None:
        return f"the given SMILES {smiles!r} is not readable by RDKit"
    with rdBase.BlockLogs():
        seen = _canonical(mol)
        if seen == _canonical(given) or _skeleton(mol) == _skeleton(given):
            return None
    return f"bonds perceived from the DFT geometry give {seen!r}, not the given SMILES {smiles!r}"


class GeometryMolecules(Sequence):
    """QM9 rows as RDKit molecules built from their DFT geometries, one at a time on access.

    Item ``i`` is the perceived molecule of row ``i`` (hydrogens removed unless ``hydrogens``;
    the conformer holds the DFT coordinates), or a :class:`RejectedMolecule` carrying the reason
    when perception fails or (with ``check_smiles``) disagrees with the row's SMILES. Building on
    access lets a :class:`MoleculeDataset` served from its cache skip the perception entirely.

    Example:
        >>> table = pd.DataFrame({"smiles": ["O"], "elements": ["['O','H','H']"],
        ...                       "xyz": ["[[0.,0.,0.],[0.96,0.,0.],[-0.24,0.93,0.]]"]})
        >>> mol = GeometryMolecules(table)[0]
        >>> mol.GetNumAtoms(), mol.GetConformer().Is3D()
        (1, True)
    """

    def __init__(self, table: pd.DataFrame, hydrogens: bool = False, check_smiles: bool = True) -> None:
        self._smiles = list(table["smiles"])
        self._elements = list(table["elements"])
        self._xyz = list(table["xyz"])
        self.hydrogens = hydrogens
        self.check_smiles = check_smiles

    @property
    def settings(self) -> str:
        """What determines the molecules besides the input rows (part of cache keys)."""
        return (f"perception v{PERCEPTION_VERSION} vdw x{COVALENT_FACTOR} charge 0 "
                f"hydrogens={self.hydrogens} check_smiles={self.check_smiles}")

    def __len__(self) -> int:
        return len(self._smiles)

    def __getitem__(self, index: int) -> Union[Chem.Mol, RejectedMolecule]:  # type: ignore[override]  # no slices
        if isinstance(index, slice):
            raise TypeError("GeometryMolecules takes integer indices")
        try:
            mol = molecule_from_geometry(*parse_geometry(self._elements[index], self._xyz[index]))
        except ValueError as err:
            return RejectedMolecule(str(err))
        if self.check_smiles:
            problem = geometry_disagreement(mol, self._smiles[index])
            if problem is not None:
                return RejectedMolecule(problem)
        if self.hydrogens:
            return mol
        with rdBase.BlockLogs():
            return Chem.RemoveAllHs(mol)
