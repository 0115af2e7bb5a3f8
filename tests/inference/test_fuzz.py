"""Property-based fuzzing: whatever the input, no uncaught exception, every
input row accounted for, order kept, predictions finite or NaN with a reason, batch result equal
to the one-molecule result.

Seeded (``derandomize=True``) and bounded: ``FUZZ_EXAMPLES`` examples per property in the suite
(default 150). For a long run set ``DGL_GRAPHTX_FUZZ_EXAMPLES``, e.g. ``DGL_GRAPHTX_FUZZ_EXAMPLES=20000``.
Every failure found is kept in :data:`fuzz_corpus.CORPUS` and replayed by ``@example``.
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest_models import seeded_model, tiny_preset
from fuzz_corpus import CSV_CORPUS, SMILES_CORPUS, ARGV_CORPUS

from dgl_graphtx.checkpoint import CheckpointMeta, LoadedCheckpoint, save_checkpoint
from dgl_graphtx.cli import main
from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.errors import GraphTxError
from dgl_graphtx.featurize import SizeLimits
from dgl_graphtx.inference import Predictor

FUZZ_EXAMPLES = int(os.environ.get("DGL_GRAPHTX_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=FUZZ_EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])

_PRESET = tiny_preset("vanilla", "tiny", num_layers=1)
#: Small budgets keep giant generated molecules cheap; they are reported like any oversized one.
_PREDICTOR = Predictor(LoadedCheckpoint(seeded_model(_PRESET, seed=3), CheckpointMeta(_PRESET.featurizer, _PRESET.relation, ["y"]), "fuzz"),
                       device="cpu", batch_size=7, limits=SizeLimits(max_atoms=600, max_relation_edges=400_000))

FRAGMENTS = [
    "C", "N", "O", "S", "P", "F", "Cl", "Br", "I", "c1ccccc1", "c1ccncc1", "C1CC1", "C=O", "C#N", "CC(=O)O",
    "[Na+]", "[K+]", "[Cl-]", "[O-]", "[NH4+]", "[N+](=O)[O-]", "[13CH4]", "[2H]C", "[14C]", "*", "[*]", "[He]",
    "[U]", "[Fe+3]", "[CH3]", "[CH2]", "[O]", "C[C@H](N)O", "C[C@@H](N)O", "F/C=C/F", "F/C=C\\F", "[Si]", "B",
    "[se]1cccc1", "c1cc[nH]c1", "C1=CC=CC=C1", "[H]", "[H][H]", "O=[N+][O-]", "[Ge]", "[Xe]", "C(F)(F)(F)F",
]
odd_smiles = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=100).map(".".join),
    st.lists(st.sampled_from(FRAGMENTS[:15]), min_size=1, max_size=12).map("".join),
    st.integers(1, 700).map(lambda n: "C" * n),  # up to 700 heavy atoms: over the 600-atom budget
    st.text(alphabet="CNOcn()[]=#@+-123456789/\\.%*Hl", max_size=40),
)
any_input = st.one_of(odd_smiles, st.text(max_size=60), st.binary(max_size=40), st.none(), st.integers(), st.floats())


def _check_table(inputs, table):
    """The table holds one row per input, in order; each is a finite prediction without error, or
    NaN with an error in words."""
    assert len(table) == len(inputs)
    assert list(table.columns) == ["smiles", "canonical_smiles", "y_pred", "error", "warning"]
    for value, error in zip(table["y_pred"], table["error"]):
        if error is None or (isinstance(error, float) and math.isnan(error)):
            assert math.isfinite(value)
        else:
            assert isinstance(error, str) and error.strip() and math.isnan(value)


@FUZZ
@given(st.lists(any_input, max_size=12))
@example([s for s in SMILES_CORPUS])
def test_predict_any_inputs(inputs):
    table = _PREDICTOR.predict(inputs)
    _check_table(inputs, table)
    assert table["smiles"].tolist() == [s if isinstance(s, str) else (repr(s)) for s in inputs]


@FUZZ
@given(st.lists(odd_smiles, min_size=1, max_size=10))
@example(SMILES_CORPUS)
def test_batch_result_equals_single_molecule_result(smiles):
    batched = _PREDICTOR.predict(smiles)
    single = pd.concat([_PREDICTOR.predict([s]) for s in smiles], ignore_index=True)
    _check_table(smiles, batched)
    assert batched["error"].fillna("").tolist() == single["error"].fillna("").tolist()
    np.testing.assert_allclose(batched["y_pred"].to_numpy(), single["y_pred"].to_numpy(), rtol=0, atol=1e-5, equal_nan=True)


cells = st.one_of(
    odd_smiles, st.text(max_size=15),
    st.sampled_from(["", "nan", "inf", "-inf", "1e308", "-1e400", "NaN", "  ", '"', "a,b", "x\ny", "ü🙂"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers(-10**30, 10**30).map(str),
)


def _csv_field(cell: str) -> str:
    """``cell`` as a CSV field: quoted, with quotes doubled, when it holds a comma, quote or line break."""
    return '"' + cell.replace('"', '""') + '"' if any(c in cell for c in ',"\r\n') else cell


@st.composite
def csv_tables(draw):
    """A CSV file's text: a header (maybe with duplicates), rows of odd cells, quoted where needed
    (by hand: pandas 2.0's and Python 3.10's writers refuse NUL characters, which files can hold)."""
    extra = draw(st.lists(st.sampled_from(["y", "y", "z", "smiles", " y", "ü"]), max_size=3))
    header = ["smiles", "y", *extra]
    rows = draw(st.lists(st.lists(cells, min_size=len(header), max_size=len(header)), min_size=0, max_size=8))
    text = "".join(",".join(_csv_field(cell) for cell in row) + "\n" for row in [header, *rows])
    return draw(st.sampled_from([text, text.replace("\n", "\r\n"), text[: len(text) // 2]]))


@FUZZ
@given(csv_tables())
@example(CSV_CORPUS[0])
@example(CSV_CORPUS[1])
def test_dataset_from_any_csv(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzzcsv") / "data.csv"
    path.write_text(text, encoding="utf-8")
    try:
        ds = MoleculeDataset.from_csv(path, "smiles", ["y"], featurizer=_PRESET.featurizer, relation=_PRESET.relation,
                                      progress=False)
    except GraphTxError as err:  # a clear error (empty file, no valid molecule, missing column...)
        assert str(err).strip() and "\n" not in str(err).strip()
        return
    total = ds.report.total_rows
    assert len(ds) + ds.report.num_skipped == total  # every row in the dataset or in the report
    assert ds.rows.tolist() == sorted(ds.rows.tolist())  # input order kept
    observed = ds.raw_labels[~ds.raw_labels.isnan()]
    assert observed.isfinite().all()  # no inf reaches training
    assert all(issue.reason.strip() for issue in ds.report.issues)


option_values = st.one_of(st.sampled_from(["0", "-1", "1", "nan", "inf", "1e9", "", "abc", "cpu", "cuda", "cuda:9", "auto", "-0"]),
                          st.text(max_size=6))
options = st.sampled_from(["--batch-size", "--device", "--smiles-col", "--max-atoms", "--max-relation-edges", "--batch-edges",
                           "--chunk-size", "--lr", "--epochs", "--patience", "--seed", "--targets", "--model", "--task"])


@st.composite
def argvs(draw):
    command = draw(st.sampled_from(["predict", "evaluate", "train", "info", "frobnicate", "--help-me"]))
    argv = [command]
    for _ in range(draw(st.integers(0, 4))):
        argv += [draw(options), draw(option_values)]
    argv += draw(st.lists(st.sampled_from(["CCO", "C1CC", "", "--", "-x", "--resume", "--overwrite"]), max_size=3))
    return argv


@pytest.fixture(scope="module")
def fuzz_checkpoint(tmp_path_factory):
    return save_checkpoint(tmp_path_factory.mktemp("fuzzck") / "m.pt", seeded_model(_PRESET, seed=3),
                           CheckpointMeta(_PRESET.featurizer, _PRESET.relation, ["y"]))


@FUZZ
@given(argvs())
@example(ARGV_CORPUS[0])
@example(ARGV_CORPUS[1])
def test_cli_argument_handling_never_crashes(fuzz_checkpoint, tmp_path_factory, argv):
    """Exit status 0 or 2, never a traceback. Training is kept off the fuzzer's path (its data file
    does not exist), so every train command ends at argument or data-file validation."""
    if argv[0] in ("predict", "evaluate"):
        argv = [*argv, "--checkpoint", str(fuzz_checkpoint)]
    if argv[0] == "evaluate":
        argv.insert(1, str(tmp_path_factory.getbasetemp() / "missing.csv"))
    if argv[0] == "train":
        argv[1:1] = [str(tmp_path_factory.getbasetemp() / "missing.csv"), "--out", str(tmp_path_factory.mktemp("o") / "r")]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    assert code in (0, 2), (argv, code, err.getvalue())
    assert "Traceback" not in err.getvalue()
    if code == 2:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), err.getvalue()
