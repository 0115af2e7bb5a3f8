"""Every ```python block of the README and docs/ runs (``tests/test_docs.py`` checks links and commands).

Each block runs as a script in a fresh process of its own (``docs_examples_runner.py``: one process
imports the library, a forked child per block) in a copy of a folder prepared with what the
examples name: a tiny trained checkpoint (``demo_run/best.pt``, ``runs/logS``, ``runs/x``; a
GRPE one, ``runs/fs`` and ``runs/fs-grpe``), molecule files made from the embedded FreeSolv set (``data.csv``,
``solubility.csv``, ``new.sdf.gz``, ``molecules.sdf.gz``; ``charges.csv`` with atom and bond lists;
``pairs.csv`` and ``mix.csv`` of several molecules per row, trained as ``runs/pairs`` and ``runs/mix``), run configurations (``run.toml``,
``run.yaml``) and the exported ``model.pt2`` with ``graphtx_portable.py``. Its ``sitecustomize.py``,
which only these processes import, caps every training at 2 epochs and every hyperparameter
search at 2 trials in one process: the library itself has no switch for it.

A block that cannot run alone (a fragment of a longer example or of the package's source, or one
that needs a GPU, the network or minutes) carries ``<!-- not run: reason -->`` on the line right
before its fence; those, and only those, are skipped, with their reason.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

import pandas as pd
import pytest
import torch
from rdkit import Chem
from rdkit.Chem import AllChem

from dgl_graphtx.cli import main as cli_main
from dgl_graphtx.datasets import MoleculeDataset, freesolv
from dgl_graphtx.inference.export import export_model
from dgl_graphtx.models import get_preset
from dgl_graphtx.nn.tracing import CAN_EXPORT
from dgl_graphtx.runs import train_and_evaluate
from dgl_graphtx.training import TrainConfig

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->")
SITECUSTOMIZE = '''"""Written by tests/test_docs_examples.py: the docs examples train briefly."""
import sys

sys.modules.setdefault("outdated", None)  # ogb asks PyPI for its latest version unless this is missing

from dgl_graphtx.models.presets import TrainRecipe  # noqa: E402
from dgl_graphtx.runs.hpopt.search import SearchSettings  # noqa: E402

recipe_checks, search_checks = TrainRecipe.__post_init__, SearchSettings.__post_init__


def two_epochs(self):
    object.__setattr__(self, "epochs", min(self.epochs, 2))
    if getattr(self, "freeze_backbone_epochs", 0) > 1:  # a frozen backbone still trains in the second epoch
        object.__setattr__(self, "freeze_backbone_epochs", 1)
    recipe_checks(self)


def two_trials(self):
    object.__setattr__(self, "trials", min(self.trials, 2))
    object.__setattr__(self, "jobs", 1)
    search_checks(self)


TrainRecipe.__post_init__, SearchSettings.__post_init__ = two_epochs, two_trials
'''
RUN_CONFIG = {"preset": {"model": "vanilla", "name": "tiny"}, "data": {"path": "data.csv", "targets": ["logS"], "split": "random"},
              "model": {"num_layers": 2, "hidden_dim": 32}, "train": {"epochs": 50}}


class Example(NamedTuple):
    where: str
    code: str
    not_run: Optional[str]


def examples() -> List[Example]:
    """The ```python blocks of the pages, dedented, with the reason of a ``not run`` marker before them."""
    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        start = None
        for number, line in enumerate(lines):
            if start is None and line.strip() == "```python":
                start = number
            elif start is not None and line.strip() == "```":
                marker = NOT_RUN.fullmatch(lines[start - 1].strip()) if start else None
                found.append(Example(f"{page.relative_to(REPO)}:{start + 1}", textwrap.dedent("\n".join(lines[start + 1:number])),
                                     marker.group(1) if marker else None))
                start = None
    return found


EXAMPLES = examples()


def prepare(folder: Path) -> None:
    """The files the examples name, in ``folder``."""
    table = freesolv().head(64)
    molecules = pd.DataFrame({"smiles": table["smiles"], "logS": table["expt"], "pKa": table["expt"] / 2 + 7,
                              "measured_logP": -table["expt"] / 3, "y": table["expt"]})
    for name in ("data.csv", "solubility.csv"):
        molecules.to_csv(folder / name, index=False)
    for name, rows in (("new.sdf.gz", molecules.head(8)), ("molecules.sdf.gz", molecules)):
        with gzip.open(folder / name, "wt") as handle, Chem.SDWriter(handle) as writer:
            for smiles, y in zip(rows["smiles"], rows["y"]):
                mol = Chem.MolFromSmiles(smiles)
                mol.SetDoubleProp("y", float(y))
                writer.write(mol)
    (folder / "run.toml").write_text("".join(f"[{section}]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())
                                             for section, fields in RUN_CONFIG.items()))
    (folder / "run.yaml").write_text(json.dumps(RUN_CONFIG))  # JSON is YAML
    small = get_preset("gradformer", num_layers=1, hidden_dim=16, num_heads=2)  # no virtual node: it exports
    for out, preset in (("demo_run", small), ("runs/fs-grpe", get_preset("grpe", "tiny"))):
        torch.manual_seed(0)
        data = MoleculeDataset(list(molecules["smiles"]), molecules[["logS"]].values, target_names=["logS"], featurizer=preset.featurizer,
                               relation=preset.relation, progress=False)
        train_and_evaluate(data, preset, TrainConfig(epochs=1, progress=False), out_dir=folder / out)
    for source, copy in (("demo_run", "runs/logS"), ("demo_run", "runs/x"), ("runs/fs-grpe", "runs/fs")):
        shutil.copytree(folder / source, folder / copy)
    if CAN_EXPORT:
        export_model(folder / "demo_run" / "best.pt", folder / "model.pt2")
    prepare_rows_and_levels(folder, list(molecules["smiles"]), list(molecules["y"]))
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)


def prepare_rows_and_levels(folder: Path, smiles: List[str], values: List[float]) -> None:
    """``charges.csv`` (Gasteiger charges, hydrogens' included, summing to the formal charge, and
    bond orders, as lists), and ``runs/pairs`` and ``runs/mix`` trained on rows of two and three
    molecules (docs/atoms_and_rows.md)."""
    rows = []
    for text in smiles:
        mol = Chem.MolFromSmiles(text)
        AllChem.ComputeGasteigerCharges(mol)
        charges = [a.GetDoubleProp("_GasteigerCharge") + a.GetDoubleProp("_GasteigerHCharge") for a in mol.GetAtoms()]
        rows.append({"smiles": text, "q": str([round(q, 4) for q in charges]),
                     "order": str([b.GetBondTypeAsDouble() for b in mol.GetBonds()])})
    pd.DataFrame(rows).to_csv(folder / "charges.csv", index=False)
    solvents = ["O", "CCO", "CCCCCCCCO"]
    pairs = pd.DataFrame({"solute": smiles, "solvent": [solvents[i % 3] for i in range(len(smiles))], "dG": values})
    pairs.to_csv(folder / "pairs.csv", index=False)
    pd.DataFrame({"a": smiles, "b": "O", "c": "C", "xa": 0.2, "xb": 0.3, "xc": 0.5, "Tm": values}).to_csv(folder / "mix.csv", index=False)
    tiny = ["--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2", "--epochs", "1", "--no-progress", "--no-cache"]
    for argv in (["pairs.csv", "--smiles-cols", "solute,solvent", "--targets", "dG", "--out", "runs/pairs"],
                 ["mix.csv", "--smiles-cols", "a,b,c", "--combine", "sum", "--mixture-weights", "xa,xb,xc", "--targets", "Tm",
                  "--out", "runs/mix"]):
        paths = [str(folder / a) if a.endswith(".csv") or a.startswith("runs/") else a for a in argv]
        assert cli_main(["train", *paths, *tiny]) == 0


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Dict[str, Dict[str, object]]:
    """Every runnable example run once: exit status and output by place."""
    root = tmp_path_factory.mktemp("docs_examples")
    (root / "prepared").mkdir()
    prepare(root / "prepared")
    (root / "examples.json").write_text(json.dumps({e.where: e.code for e in EXAMPLES if e.not_run is None}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "prepared"), str(REPO)]), "OMP_NUM_THREADS": "1",
           "OUTDATED_IGNORE": "1", "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, str(Path(__file__).with_name("docs_examples_runner.py")), str(root / "prepared"),
                    str(root / "examples.json"), str(root / "results.json")], env=env, check=True, timeout=1800)
    return json.loads((root / "results.json").read_text())


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.where for e in EXAMPLES])
def test_docs_example_runs(example, results):
    if example.not_run is not None:
        pytest.skip(f"not run: {example.not_run}")
    if not CAN_EXPORT and ("graphtx_portable" in example.code or "export_model" in example.code):
        pytest.skip(f"exported models need torch 2.6 or newer (this is {torch.__version__})")
    result = results[example.where]
    assert result["status"] == 0, f"{example.where} failed:\n{example.code}\n---\n{result['output']}"


def test_not_run_markers_stand_right_before_a_python_block():
    marked = {e.where for e in EXAMPLES if e.not_run is not None}
    for page in PAGES:
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if NOT_RUN.fullmatch(line.strip()):
                assert number + 1 < len(lines) and lines[number + 1].strip() == "```python", f"{page.name}:{number + 1}: no block after"
                assert f"{page.relative_to(REPO)}:{number + 2}" in marked
