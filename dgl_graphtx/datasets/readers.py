"""One reader for every molecule file the library accepts: delimited tables (CSV, TSV, any
single-character delimiter, sniffed or given; optionally gzipped), SDF (``.sdf``, ``.sd``, also
gzipped; SD properties become columns, the structure is the molecule), SMILES files (``.smi``)
and XYZ files (``.xyz``: coordinates, bonds perceived from them; comment-line properties become
columns).

Every command that reads molecules (``train``, ``predict --input``, ``evaluate``, ``embed``) and
:meth:`MoleculeDataset.from_file` go through :func:`read_molecules`, so they accept the same inputs
and fail the same way: one :class:`~dgl_graphtx.errors.ConfigError` naming the file, the row or
record, and the fix.
"""
from __future__ import annotations

import csv
import gzip
import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union, cast

import numpy as np
import pandas as pd
from rdkit import Chem, rdBase

from ..errors import ConfigError
from ..featurize import FeaturizerConfig
from ..featurize.molecule import MoleculeLike, RejectedMolecule, prepare_input
from .geometry import molecule_from_geometry

PathLike = Union[str, Path]

#: File kinds by suffix (after an optional ``.gz``); anything else is read as a delimited table.
SDF_SUFFIXES = (".sdf", ".sd")
SMI_SUFFIXES = (".smi", ".smiles")
XYZ_SUFFIXES = (".xyz",)
_SNIFF_DELIMITERS = ",\t;|"
_SNIFF_BYTES = 1 << 16


def file_kind(path: PathLike) -> str:
    """``"sdf"``, ``"smi"``, ``"xyz"`` or ``"table"``, from the suffix (a trailing ``.gz`` is ignored).

    Example:
        >>> file_kind("mols.sdf.gz"), file_kind("x.smi"), file_kind("data.tsv"), file_kind("geom.xyz")
        ('sdf', 'smi', 'table', 'xyz')
    """
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    if last in SDF_SUFFIXES:
        return "sdf"
    if last in SMI_SUFFIXES:
        return "smi"
    if last in XYZ_SUFFIXES:
        return "xyz"
    return "table"


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def _read_text(path: Path, what: str) -> str:
    """The whole file as text (gunzipped when it is gzip data), with errors naming the file; the
    line breaks of a file that ends its lines with a carriage return alone (classic Mac OS, some
    spreadsheet exports) become newlines."""
    try:
        raw = gzip.open(path, "rb").read() if _is_gzip(path) else path.read_bytes()
    except (OSError, EOFError) as err:
        raise ConfigError(f"cannot read {path} as {what}: {err}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            text = raw.decode("latin-1")
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes any byte
            text = ""
        if "\x00" in text or sum(not (c.isprintable() or c.isspace()) for c in text[:4096]) > 16:
            raise ConfigError(f"cannot read {path} as {what}: it is binary data, not text") from None
    return text.replace("\r", "\n") if "\r" in text and "\n" not in text else text


def check_file(path: PathLike, what: str) -> Path:
    """``path`` as a ``Path`` when it names a file; else a :class:`ConfigError` naming it as a ``what`` file.

    Example:
        >>> check_file("no/such.csv", "molecule")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: molecule file not found: no/such.csv
    """
    path = Path(path)
    if path.is_dir():
        unfinished = ((path / "plan.json").exists() or (path / "shards").is_dir()) and not (path / "manifest.json").exists()
        hint = (": it looks like a featurized store that is not finished (it has no manifest.json); run dgl-graphtx featurize "
                "again with the same arguments to finish it" if unfinished else "")
        raise ConfigError(f"{path} is a folder, not a {what} file{hint}")
    if not path.is_file():
        raise ConfigError(f"{what} file not found: {path}")
    return path


@dataclass
class MoleculeTable:
    """Molecules read from one file.

    Attributes:
        source: the file.
        kind: ``table``, ``sdf``, ``smi`` or ``xyz``.
        molecules: one entry per row/record: SMILES text (tables, ``.smi``) or an RDKit molecule
            (SDF, XYZ; ``None`` for an SDF record RDKit could not read, a rejected molecule with
            the reason for an XYZ block without perceivable bonds).
        identifiers: text naming each entry in reports: the SMILES, or for an unreadable SDF
            record ``SDF record <n> (line <l>: <title>)``.
        columns: the other columns (tables), SD properties (SDF), names (``.smi``) or comment-line
            properties (XYZ), one row
            per entry, as read.
        names: the molecules' own names where the format has them: SDF titles (``_Name``),
            ``.smi`` names and XYZ comment names (``""`` where absent); ``None`` for tables (see :meth:`carried_columns`).
    """

    source: Path
    kind: str
    molecules: List[Optional[MoleculeLike]]
    identifiers: List[str]
    columns: pd.DataFrame
    names: Optional[List[str]] = None

    def __len__(self) -> int:
        return len(self.molecules)

    def targets(self, names: Sequence[str]) -> pd.DataFrame:
        """The columns ``names`` (target values as read; converted and checked by the dataset).

        Raises :class:`ConfigError` when a name is repeated or absent from the file.

        Example:
            >>> import tempfile, pathlib
            >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.csv"
            >>> _ = p.write_text("smiles,y\\nCCO,1.0\\n")
            >>> read_molecules(p).targets(["y"])["y"].tolist()
            [1.0]
        """
        names = list(names)
        check_unique(names, "target")
        if names and self.kind == "smi":
            raise ConfigError(f"{self.source} is a .smi file, which holds SMILES and names only, so it cannot hold the labels "
                              f"{names} (--targets); use a CSV/TSV with a column per target, or an SDF with SD properties")
        missing = [n for n in names if n not in self.columns.columns]
        if missing:
            what = "SD propert" + ("ies" if len(missing) > 1 else "y") if self.kind == "sdf" else "column(s)"
            where = "in any record of" if self.kind == "sdf" else "in"
            available = [c for c in self.columns.columns]
            raise ConfigError(
                f"{what} {missing} not found {where} {self.source}; available: {available}. "
                "Check the spelling of the target names (they are case-sensitive)"
            )
        return self.columns[names].reset_index(drop=True)

    def carried_columns(self, id_col: Optional[str] = None, keep_cols: Sequence[str] = ()) -> pd.DataFrame:
        """The columns that travel with each molecule into prediction, embedding and evaluation
        tables: ``name`` (SDF title or ``.smi`` name, when any molecule has one), ``id_col`` and
        ``keep_cols`` (table columns or SD properties, as read), one row per entry.

        Example:
            >>> import tempfile, pathlib
            >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.csv"
            >>> _ = p.write_text("smiles,cid,mw\\nCCO,A1,46\\n")
            >>> read_molecules(p).carried_columns("cid", ["mw"]).to_dict("records")
            [{'cid': 'A1', 'mw': 46}]
        """
        wanted = ([id_col] if id_col else []) + [c for c in keep_cols if c != id_col]
        if wanted and self.kind == "smi":
            raise ConfigError(f"{self.source} is a .smi file: it holds only SMILES and names (carried as 'name'), "
                              "no columns for --id-col / --keep-cols")
        check_unique(wanted, "carried column")
        missing = [c for c in wanted if c not in self.columns.columns]
        if missing:
            what = "SD propert" + ("ies" if len(missing) > 1 else "y") if self.kind == "sdf" else "column(s)"
            raise ConfigError(f"{what} {missing} (--id-col / --keep-cols) not in {self.source}; "
                              f"available: {list(self.columns.columns)}")
        out = self.columns[wanted].reset_index(drop=True).copy()
        if self.names is not None and any(self.names) and "name" not in out.columns:
            out.insert(0, "name", self.names)
        return out

    def column(self, name: str) -> List[str]:
        """Values of column ``name`` as text (blank cells as ``""``), with an error naming the file."""
        if name not in self.columns.columns:
            raise ConfigError(f"column {name!r} not in {self.source}; columns are {list(self.columns.columns)}")
        return ["" if pd.isna(v) else str(v).strip() for v in self.columns[name]]


def check_unique(names: Sequence[str], what: str) -> None:
    """Raise :class:`ConfigError` if a name occurs twice.

    Example:
        >>> check_unique(["expt", "expt"], "target")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: target 'expt' given 2 times; each target must be named once
    """
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        counts = Counter(names)
        raise ConfigError(
            "; ".join(f"{what} {n!r} given {counts[n]} times" for n in repeated) + f"; each {what} must be named once"
        )


def sniff_delimiter(sample: str, path: PathLike = "") -> str:
    """The delimiter of a delimited text sample: ``,``, tab, ``;`` or ``|`` (``.tsv``: tab).

    Example:
        >>> sniff_delimiter("smiles\\tlogS\\nCCO\\t1.0\\n")
        '\\t'
    """
    if Path(str(path).removesuffix(".gz")).suffix.lower() == ".tsv":
        return "\t"
    lines = [line for line in sample.splitlines() if line.strip()][:50]
    if not lines:
        return ","
    try:
        return csv.Sniffer().sniff("\n".join(lines), delimiters=_SNIFF_DELIMITERS).delimiter
    except csv.Error:
        header = lines[0]
        counts = {d: header.count(d) for d in _SNIFF_DELIMITERS}
        best = max(counts, key=counts.__getitem__)
        return best if counts[best] else ","


def parse_delimiter(text: str) -> str:
    """A table delimiter as given: ``"tab"`` or ``"\\t"`` is a tab, otherwise one character.

    Example:
        >>> parse_delimiter("tab"), parse_delimiter("\\t"), parse_delimiter(";")
        ('\\t', '\\t', ';')
    """
    if text.lower() in ("tab", "\\t"):
        return "\t"
    if len(text) != 1:
        raise ConfigError(f"delimiter must be one character, 'tab' or '\\t', got {text!r}")
    return text


def read_molecule_csv(path: PathLike, smiles_col: str = "smiles", delimiter: Optional[str] = None) -> pd.DataFrame:
    """Read a delimited table of molecules (SMILES kept as text; gzip detected from the content),
    with one-line errors for the usual mistakes: missing, empty, binary or malformed file, repeated
    column names, no ``smiles_col`` column.

    Args:
        path: the file.
        smiles_col: the column holding SMILES.
        delimiter: one character, or ``"tab"`` (:func:`parse_delimiter`); sniffed from the first lines when ``None``.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.csv"
        >>> _ = p.write_text("smiles;y\\nCCO;1.0\\n")
        >>> read_molecule_csv(p).shape
        (1, 2)
    """
    path = check_file(path, "data")
    text = _read_text(path, "CSV")
    sep = parse_delimiter(delimiter) if delimiter is not None else sniff_delimiter(text[:_SNIFF_BYTES], path)
    header = next(csv.reader(io.StringIO(text), delimiter=sep), None)
    if not header:
        raise ConfigError(f"cannot read {path} as CSV: the file is empty (expected a header row naming the columns)")
    repeated = [name for name, count in Counter(h.strip() for h in header).items() if count > 1]
    if repeated:
        raise ConfigError(f"{path} has repeated column names {repeated}; rename them so that each column is named once")
    try:
        frame = pd.read_csv(io.StringIO(text), sep=sep, dtype={smiles_col: str}, skipinitialspace=True)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as err:
        raise ConfigError(f"cannot read {path} as CSV (delimiter {sep!r}): {err}") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if smiles_col not in frame.columns:
        hint = "" if delimiter else f" (delimiter sniffed as {sep!r}; give --delimiter if that is wrong)"
        raise ConfigError(f"column {smiles_col!r} not in {path}; columns are {list(frame.columns)}{hint}")
    return frame


def smiles_column(frame: pd.DataFrame, smiles_col: str) -> List[str]:
    """The SMILES column as strings, blank cells as ``""`` (reported as empty SMILES later).

    Example:
        >>> smiles_column(pd.DataFrame({"smiles": ["CCO", None]}), "smiles")
        ['CCO', '']
    """
    return ["" if pd.isna(s) else str(s) for s in frame[smiles_col]]


def _record_start_lines(text: str) -> List[int]:
    """1-based line number where each SDF record starts."""
    starts, line_no = [1], 0
    for line_no, line in enumerate(text.splitlines(), start=1):
        if line.strip() == "$$$$":
            starts.append(line_no + 1)
    return starts


#: Prefixes of SD property lists holding one value per atom or per bond (RDKit's convention;
#: ``n/a`` marks a missing value): what atom- and bond-level targets are read from.
PROPERTY_LISTS = {"atom": ("atom.dprop.", "atom.prop."), "bond": ("bond.dprop.", "bond.prop.")}


def list_problem_key(level: str, name: str) -> str:
    """The private molecule property noting why an SD ``level`` property list ``name`` was not read."""
    return f"_dgl_graphtx_list_{level}_{name}"


def check_property_lists(mol: Chem.Mol) -> None:
    """Note on ``mol`` each of its atom and bond property lists whose length is not the number of
    atoms or bonds (RDKit leaves those unread; :func:`list_problem_key` holds why), and read the
    bond lists an older RDKit leaves as text.

    Example:
        >>> mol = Chem.MolFromSmiles("CCO")
        >>> mol.SetProp("bond.dprop.order", "1 n/a"); mol.SetProp("atom.dprop.q", "0.1 0.2")
        >>> check_property_lists(mol)
        >>> [b.GetDoubleProp("order") if b.HasProp("order") else None for b in mol.GetBonds()], mol.GetProp(list_problem_key("atom", "q"))
        ([1.0, None], 'atom.dprop.q lists 2 values for the 3 atoms of the record')
    """
    for key in mol.GetPropNames():
        for level, prefixes in PROPERTY_LISTS.items():
            prefix = next((p for p in prefixes if key.startswith(p)), None)
            if prefix is None:
                continue
            name, values = key[len(prefix):], mol.GetProp(key).split()
            count = mol.GetNumAtoms() if level == "atom" else mol.GetNumBonds()
            if len(values) != count:
                mol.SetProp(list_problem_key(level, name), f"{key} lists {len(values)} values for the {count} {level}s of the record")
            elif level == "bond" and prefix == "bond.dprop." and not any(b.HasProp(name) for b in mol.GetBonds()):
                try:
                    numbers = [None if text == "n/a" else float(text) for text in values]
                except ValueError:
                    mol.SetProp(list_problem_key(level, name), f"{key} holds values that are not numbers ('n/a' where unknown)")
                    continue
                for bond, number in zip(mol.GetBonds(), numbers):
                    if number is not None:
                        bond.SetDoubleProp(name, number)


def read_sdf(path: PathLike, featurizer: FeaturizerConfig = FeaturizerConfig()) -> MoleculeTable:
    """Read an SDF (or gzipped SDF): molecules with their coordinates, SD properties as columns,
    prepared for ``featurizer`` as every route prepares them (:func:`~dgl_graphtx.featurize.molecule.prepare_input`:
    hydrogen atoms removed unless it keeps them).

    Unreadable records stay in place as ``None`` with an identifier naming the record number
    (0-based, like rows), its first line (1-based) and its title, so reports point at them.

    Example:
        >>> from dgl_graphtx.datasets import example_sdf_path
        >>> table = read_sdf(example_sdf_path())
        >>> len(table), table.columns.shape[1] > 0
        (8, True)
    """
    path = check_file(path, "SDF")
    text = _read_text(path, "SDF")
    if not text.strip():
        raise ConfigError(f"SDF file {path} is empty: it holds no molecule records")
    supplier = Chem.SDMolSupplier()
    supplier.SetData(text, removeHs=False)  # hydrogens are prepare_input's decision
    starts = _record_start_lines(text)
    molecules: List[Optional[MoleculeLike]] = []
    identifiers: List[str] = []
    titles: List[str] = []
    properties: List[dict] = []
    with rdBase.BlockLogs():
        for index in range(len(supplier)):
            read = supplier[index]
            if read is not None:
                check_property_lists(read)
            mol = cast(Chem.Mol, prepare_input(read, featurizer)) if read is not None else None  # a molecule stays one
            molecules.append(mol)
            if mol is None:
                item = supplier.GetItemText(index) or ""
                title = item.splitlines()[0].strip() if item.strip() else ""
                line = f"line {starts[index]}" if index < len(starts) else "?"
                identifiers.append(f"SDF record {index} ({line}" + (f": {title})" if title else ")"))
                titles.append(title)
                properties.append({})
            else:
                identifiers.append(Chem.MolToSmiles(mol))
                titles.append(mol.GetProp("_Name").strip() if mol.HasProp("_Name") else "")
                properties.append(mol.GetPropsAsDict(includePrivate=False, includeComputed=False))
    if not molecules:
        raise ConfigError(f"SDF file {path} holds no molecule records (is it an SDF file?)")
    if all(m is None for m in molecules):
        raise ConfigError(f"RDKit could not read any of the {len(molecules)} records of {path}; is it a V2000/V3000 SDF file?")
    columns = pd.DataFrame(properties, index=range(len(molecules)))
    return MoleculeTable(path, "sdf", molecules, identifiers, columns, titles)


def read_smi(path: PathLike) -> MoleculeTable:
    """Read a SMILES file: one molecule per line, the SMILES then an optional name (whitespace
    separated); a first line ``smiles ...`` is taken as a header.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.smi"
        >>> _ = p.write_text("CCO ethanol\\nc1ccccc1 benzene\\n")
        >>> t = read_smi(p)
        >>> t.molecules, t.columns["name"].tolist()
        (['CCO', 'c1ccccc1'], ['ethanol', 'benzene'])
    """
    path = check_file(path, "SMILES")
    lines = [line.strip() for line in _read_text(path, "a SMILES file").splitlines()]
    rows = [line.split(None, 1) for line in lines if line and not line.startswith("#")]
    if rows and rows[0][0].lower() == "smiles":
        rows = rows[1:]
    if not rows:
        raise ConfigError(f"SMILES file {path} is empty: expected one SMILES (and optionally a name) per line")
    smiles = [row[0] for row in rows]
    names = [row[1].strip() if len(row) > 1 else "" for row in rows]
    return MoleculeTable(path, "smi", list(smiles), list(smiles), pd.DataFrame({"name": names}), names)


def read_xyz(path: PathLike, featurizer: FeaturizerConfig = FeaturizerConfig(), charge: int = 0) -> MoleculeTable:
    """Read an XYZ file (gzipped too): one or more blocks of an atom count, a comment line and one
    line per atom (element symbol or number, then x y z in Angstrom). RDKit perceives each
    block's bonds, bond orders and formal charges from the coordinates
    (:func:`~dgl_graphtx.datasets.geometry.molecule_from_geometry`, ``rdDetermineBonds``), and
    the molecule is prepared for ``featurizer`` as every route prepares it (hydrogen atoms removed
    unless it keeps them; the 3-D conformer stays).

    The comment line may hold properties as ``key=value`` pairs (extended XYZ, as ASE writes it:
    ``charge=-1 logS=-2.3``): they become columns (targets, ``--keep-cols``). ``charge`` is the
    block's total charge, which bond perception needs; blocks without one have total charge
    ``charge``. A comment without ``=`` is the block's name. A block whose bonds cannot be
    perceived stays in place with the reason (reported for its row, as an unreadable SDF record).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "w.xyz"
        >>> _ = p.write_text("3\\nwater\\nO 0 0 0\\nH 0.96 0 0\\nH -0.24 0.93 0\\n2\\ncharge=-1\\nO 0 0 0\\nH 0.97 0 0\\n")
        >>> table = read_xyz(p)
        >>> table.identifiers, table.names, table.columns["charge"].tolist()
        (['O', '[OH-]'], ['water', ''], [nan, '-1'])
    """
    path = check_file(path, "XYZ")
    lines = _read_text(path, "XYZ").splitlines()
    molecules: List[Optional[MoleculeLike]] = []
    identifiers: List[str] = []
    names: List[str] = []
    properties: List[dict] = []
    for index, (line, comment, atoms) in enumerate(_xyz_blocks(lines, path)):
        pairs = dict(token.split("=", 1) for token in comment.split() if "=" in token)
        properties.append(pairs)
        names.append(pairs.get("name", "") if pairs else comment.strip())
        try:
            symbols, coords = _xyz_atoms(atoms, line + 2)
            total = int(pairs.get("charge", charge))
            mol = prepare_input(molecule_from_geometry(symbols, coords, total), featurizer)
        except ValueError as err:
            mol = RejectedMolecule(f"XYZ record {index} (line {line}): {err}")
        molecules.append(mol)
        identifiers.append(Chem.MolToSmiles(mol) if isinstance(mol, Chem.Mol) else f"XYZ record {index} (line {line})")
    if not molecules:
        raise ConfigError(f"XYZ file {path} is empty: expected blocks of an atom count, a comment line and one line per atom")
    return MoleculeTable(path, "xyz", molecules, identifiers, pd.DataFrame(properties, index=range(len(molecules))), names)


def _xyz_blocks(lines: Sequence[str], path: Path) -> List[Tuple[int, str, List[str]]]:
    """``(first line, comment, atom lines)`` of each block of an XYZ file (lines 1-based)."""
    blocks, i = [], 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        count = lines[i].strip()
        if not count.isdigit():
            raise ConfigError(f"line {i + 1} of {path} should give the atom count of an XYZ block, got {count!r}; "
                              "an XYZ file is blocks of: atom count, comment line, one 'element x y z' line per atom")
        end = i + 2 + int(count)
        if end > len(lines):
            raise ConfigError(f"the XYZ block at line {i + 1} of {path} announces {count} atoms, but the file ends "
                              f"after {max(len(lines) - i - 2, 0)}")
        blocks.append((i + 1, lines[i + 1], list(lines[i + 2:end])))
        i = end
    return blocks


def _xyz_atoms(atoms: Sequence[str], first_line: int) -> Tuple[List[str], np.ndarray]:
    """Element symbols and coordinates ``[N, 3]`` of an XYZ block's atom lines."""
    table = Chem.GetPeriodicTable()
    symbols, coords = [], []
    for offset, text in enumerate(atoms):
        fields = text.split()
        try:
            symbol = table.GetElementSymbol(int(fields[0])) if fields[0].isdigit() else fields[0]
            coords.append([float(v) for v in fields[1:4]])
        except (IndexError, ValueError, RuntimeError):
            raise ValueError(f"line {first_line + offset} should be 'element x y z', got {text.strip()!r}") from None
        if len(coords[-1]) != 3:
            raise ValueError(f"line {first_line + offset} should be 'element x y z', got {text.strip()!r}")
        symbols.append(symbol)
    return symbols, np.array(coords, dtype=np.float64).reshape(len(symbols), 3)


def read_table(path: PathLike, smiles_col: str = "smiles", delimiter: Optional[str] = None) -> MoleculeTable:
    """A delimited table as a :class:`MoleculeTable` (see :func:`read_molecule_csv`).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.tsv"
        >>> _ = p.write_text("smiles\\ty\\nCCO\\t1.0\\n")
        >>> read_table(p).columns.columns.tolist()
        ['smiles', 'y']
    """
    frame = read_molecule_csv(path, smiles_col, delimiter)
    smiles = smiles_column(frame, smiles_col)
    return MoleculeTable(Path(path), "table", list(smiles), list(smiles), frame.reset_index(drop=True))


def read_molecules(
    path: PathLike, smiles_col: str = "smiles", delimiter: Optional[str] = None, featurizer: FeaturizerConfig = FeaturizerConfig()
) -> MoleculeTable:
    """Read any supported molecule file, chosen by its suffix (``.gz`` allowed on all of them).

    Args:
        path: ``.csv``/``.tsv``/other delimited text, ``.sdf``/``.sd``, ``.smi`` or ``.xyz``.
        smiles_col: SMILES column of a table (ignored for SDF and ``.smi``).
        delimiter: table delimiter (sniffed when ``None``).
        featurizer: the settings the molecules are read for (whether an SDF's hydrogens stay atoms;
            see :func:`~dgl_graphtx.featurize.molecule.prepare_input`).

    Example:
        >>> from dgl_graphtx.datasets import example_sdf_path, freesolv_path
        >>> read_molecules(freesolv_path()).kind, read_molecules(example_sdf_path()).kind
        ('table', 'sdf')
    """
    kind = file_kind(path)
    if kind == "sdf":
        return read_sdf(path, featurizer)
    if kind == "smi":
        return read_smi(path)
    if kind == "xyz":
        return read_xyz(path, featurizer)
    return read_table(path, smiles_col, delimiter)


def split_labels(values: Sequence[str], source: PathLike, column: str) -> np.ndarray:
    """A split column's values as ``train``/``valid``/``test`` (``val``, ``validation``, ``dev``
    also mean ``valid``; case and spaces ignored), with an error naming the first bad row.

    Example:
        >>> split_labels(["train", "Val", "TEST"], "d.csv", "split").tolist()
        ['train', 'valid', 'test']
    """
    aliases = {"train": "train", "training": "train", "valid": "valid", "val": "valid", "validation": "valid",
               "dev": "valid", "test": "test", "testing": "test"}
    out = []
    for row, value in enumerate(values):
        key = str(value).strip().lower()
        if key not in aliases:
            raise ConfigError(
                f"row {row} of {source}: split column {column!r} holds {value!r}; use train, valid or test"
            )
        out.append(aliases[key])
    return np.array(out)
