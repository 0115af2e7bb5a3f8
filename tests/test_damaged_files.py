"""Fault injection: every file that a training run, an ensemble, a cross-validation, a store
(finished and interrupted), a pretraining folder (finished and interrupted while computing its
descriptors) and an interrupted ``predict --output`` leave behind is, in turn, cut to half its
length, given one flipped byte (the middle one), and deleted; then the commands that read that
folder run on it. Each command must end in one ``error:`` line (exit status 2) or give exactly
what it gives on the intact folder, never a traceback and never another result.

The files are found by walking each folder, so a file a later version adds is covered without a
new test. Each folder is built once (tiny models, 24 molecules, one epoch) and copied per case.
A command runs on a damaged copy only if, on the intact folder, it opened the file (or, for a
deleted file, opened or looked for it): a command that never looks at a file gives what it gave."""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import pandas as pd
import pytest

from cli_runner import run_cli
from conftest_models import freesolv_rows

from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.datasets import load_store, sharded_store
from dgl_graphtx.errors import GraphTxError
from dgl_graphtx.inference import Predictor
from dgl_graphtx.runs import descriptor_chunks

MODEL = ["--model", "vanilla", "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]
FAST = ["--epochs", "1", "--batch-size", "8", "--device", "cpu", "--no-progress"]
NEW = ["CCO", "c1ccccc1O", "CC(=O)N", "not a smiles"]
DAMAGES = ("truncated", "flipped", "deleted")


def _must(argv: Sequence[object]) -> str:
    code, out, err = run_cli(argv)
    assert code == 0, (argv, err)
    return out


@dataclass
class Step:
    """A command that reads a folder: ``argv(root, scratch)``, and what of its outcome is compared
    (``result(root, scratch, stdout)``, read only when it succeeded)."""

    name: str
    argv: Callable[[Path, Path], List[object]]
    result: Callable[[Path, Path, str], str]


@dataclass
class Built:
    """A folder as a command left it, the commands that read it, and their outcomes on it intact."""

    root: Path
    steps: List[Step]
    patches: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    baseline: Optional[Dict[str, str]] = None


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")


def predict_step(rel: str = "") -> Step:
    return Step(f"predict {rel or '.'}", lambda root, tmp: ["predict", "--checkpoint", root / rel, *NEW, "--output", tmp / "p.csv",
                                                            "--device", "cpu", "--no-progress"],
                lambda root, tmp, out: _text(tmp / "p.csv"))


def evaluate_steps(root: Path) -> List[Step]:
    """``evaluate`` of every table of saved predictions in the folder."""
    return [Step(f"evaluate {p.relative_to(root)}", lambda r, tmp, rel=p.relative_to(root): ["evaluate", r / rel],
                 lambda r, tmp, out: out) for p in sorted(root.rglob("*predictions.csv"))]


def _predictions_after(root: Path, tmp: Path) -> str:
    """What the run in ``root`` predicts (after a command changed it)."""
    code, _, err = run_cli(["predict", "--checkpoint", root, *NEW, "--output", tmp / "after.csv", "--device", "cpu"])
    return _text(tmp / "after.csv") if code == 0 else f"the folder no longer predicts: {err}"


def _store_content(store: Path, tmp: Path, out: str) -> str:
    """What the store ``store`` holds, as training reads it."""
    try:
        dataset = load_store(store)
    except GraphTxError as err:
        return f"the store no longer opens: {err}"
    return repr(_plain(dataset.payload()))


def _plain(value: object) -> object:
    """Nested tensors, dicts and lists as plain Python values (compared with ``==`` as text)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.tolist() if hasattr(value, "tolist") else value


def _backbone_digest(root: Path, tmp: Path, out: str) -> str:
    state = load_checkpoint(root / "backbone.pt").model.state_dict()
    return hashlib.sha256(b"".join(state[k].numpy().tobytes() for k in sorted(state))).hexdigest()


class FileTrace:
    """The files a block of code opened (``opened``, from the ``open`` audit event, which every
    Python, NumPy, pandas and torch read raises) or looked for (``looked``: ``os.stat``, ``os.lstat``)."""

    active: Optional["FileTrace"] = None
    hooked = False

    def __init__(self) -> None:
        self.opened: Set[Path] = set()
        self.looked: Set[Path] = set()

    @staticmethod
    def _audit(event: str, args: tuple) -> None:
        trace = FileTrace.active
        if trace is not None and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            trace.opened.add(Path(os.fsdecode(args[0])).absolute())

    def _watching(self, real: Callable) -> Callable:
        def stat(path, *args, **kwargs):
            if isinstance(path, (str, bytes, os.PathLike)):
                self.looked.add(Path(os.fsdecode(path)).absolute())
            return real(path, *args, **kwargs)
        return stat

    @contextlib.contextmanager
    def recording(self) -> Iterator["FileTrace"]:
        if not FileTrace.hooked:  # an audit hook cannot be removed: one for the session
            sys.addaudithook(FileTrace._audit)
            FileTrace.hooked = True
        with pytest.MonkeyPatch.context() as patch:
            for name in ("stat", "lstat"):
                patch.setattr(os, name, self._watching(getattr(os, name)))
            FileTrace.active = self
            try:
                yield self
            finally:
                FileTrace.active = None


def _damage(path: Path, damage: str) -> bool:
    """Damage ``path``; ``False`` when there is nothing to do (an empty file cut or flipped)."""
    data = path.read_bytes()
    if damage == "deleted":
        path.unlink()
    elif not data:
        return False
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    else:
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(flipped))
    return True


def _outcome(step: Step, root: Path, work: Path) -> str:
    """``step`` on ``root``: ``refused: <line>``, its result, or what else happened (a traceback)."""
    work.mkdir(parents=True)
    try:
        code, out, err = run_cli(step.argv(root, work))
    except Exception as error:  # noqa: BLE001  (reported with the case, as a failure)
        return f"neither one error line nor success: a traceback ({type(error).__name__}: {error})"
    lines = [line for line in err.splitlines() if line.strip()]
    if code == 2 and len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in out + err:
        return f"refused: {lines[0]}"
    if code == 0:
        return step.result(root, work, out)
    return f"neither one error line nor success (exit {code}): {err[-2000:]}"


def _judge(rel: Path, damage: str, step: str, outcome: str, expected: str, root_name: str) -> Optional[str]:
    """What is wrong with ``outcome`` of ``step`` on ``rel`` damaged so, if anything."""
    if outcome.startswith("refused: "):
        named = rel.name in outcome or rel.parent.name in outcome or root_name in outcome
        return None if named else f"{rel} {damage}: {step}: the error does not name the file: {outcome}"
    if outcome == expected:
        return None
    return f"{rel} {damage}: {step}: {outcome[:300] if outcome.startswith('neither') else 'another result'}"


def walk(built: Built, tmp: Path) -> List[str]:
    """Every file of the folder damaged in every way, the steps that open (or look for) it run on
    the damaged copy; the cases that broke the rule, in words."""
    intact = tmp / "intact" / built.root.name
    shutil.copytree(built.root, intact)
    expected, seen = {}, {}
    with built.patches():
        for number, step in enumerate(built.steps):
            with FileTrace().recording() as trace:
                expected[step.name] = _outcome(step, intact, tmp / "intact" / f"step{number}")
            seen[step.name] = ({p.relative_to(intact) for p in trace.opened if p.is_relative_to(intact)},
                               {p.relative_to(intact) for p in trace.opened | trace.looked if p.is_relative_to(intact)})
        broken = [f"intact folder: {name}: {outcome}" for name, outcome in expected.items() if outcome.startswith(("refused", "neither"))]
        for number, (rel, damage) in enumerate(_cases(built)):
            steps = [(i, s) for i, s in enumerate(built.steps) if rel in seen[s.name][damage == "deleted"]]
            if not steps:
                continue
            root = tmp / f"case{number}" / built.root.name
            shutil.copytree(built.root, root)
            if _damage(root / rel, damage):
                for i, step in steps:
                    broken.append(_judge(rel, damage, step.name, _outcome(step, root, root.parent / f"step{i}"),
                                         expected[step.name], built.root.name))
            shutil.rmtree(root.parent)
    return [problem for problem in broken if problem]


def _cases(built: Built) -> Iterator[Tuple[Path, str]]:
    for path in sorted(p for p in built.root.rglob("*") if p.is_file()):
        for damage in DAMAGES:
            yield path.relative_to(built.root), damage


# --------------------------------------------------------------------------------------------
# the folders, built once per session
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("damage-data") / "data.csv"
    freesolv_rows(0, 24)[["smiles", "expt"]].to_csv(path, index=False)
    return path


def _train(data: Path, out: Path, *more: object) -> Path:
    _must(["train", data, "--targets", "expt", "--out", out, *MODEL, *FAST, *more])
    return out


@pytest.fixture(scope="session")
def run_folder(data, tmp_path_factory) -> Built:
    root = _train(data, tmp_path_factory.mktemp("damage-run") / "run", "--uncertainty", "mve")
    resume = Step("train --resume", lambda r, tmp: ["train", data, "--targets", "expt", "--out", r, "--resume", "--uncertainty",
                                                    "mve", *MODEL, *FAST], lambda r, tmp, out: _predictions_after(r, tmp))
    return Built(root, [predict_step(), *evaluate_steps(root), resume])


@pytest.fixture(scope="session")
def ensemble_folder(data, tmp_path_factory) -> Built:
    root = _train(data, tmp_path_factory.mktemp("damage-ensemble") / "ensemble", "--ensemble-size", "2", "--uncertainty", "ensemble",
                  "--kernel", "none")  # members carried by the kernel would agree exactly: no spread to calibrate
    return Built(root, [predict_step(), predict_step("replicate_0"), *evaluate_steps(root)])


@pytest.fixture(scope="session")
def cv_folder(data, tmp_path_factory) -> Built:
    root = _train(data, tmp_path_factory.mktemp("damage-cv") / "cv", "--cv", "3", "--uncertainty", "mve",
                  "--calibration-share", "0.25")
    return Built(root, [predict_step(), *evaluate_steps(root)])


STORE = ["--targets", "expt", "--model", "vanilla", "--preset", "tiny", "--shard-size", "5", "--no-progress"]


@pytest.fixture(scope="session")
def store_data(tmp_path_factory) -> Path:
    """12 molecules: three shards of up to five."""
    path = tmp_path_factory.mktemp("damage-store-data") / "data.csv"
    freesolv_rows(0, 12)[["smiles", "expt"]].to_csv(path, index=False)
    return path


def _store_steps(data: Path) -> List[Step]:
    featurize = Step("featurize", lambda r, tmp: ["featurize", data, "--out", r, *STORE], _store_content)
    train = Step("train STORE", lambda r, tmp: ["train", r, "--targets", "expt", "--out", tmp / "t", *FAST],
                 lambda r, tmp, out: _text(tmp / "t" / "test_predictions.csv"))
    return [train, featurize]


@pytest.fixture(scope="session")
def store_folder(store_data, tmp_path_factory) -> Built:
    root = tmp_path_factory.mktemp("damage-store") / "store"
    _must(["featurize", store_data, "--out", root, *STORE])
    return Built(root, _store_steps(store_data))


@pytest.fixture(scope="session")
def interrupted_store(store_data, tmp_path_factory) -> Built:
    """A store stopped (as by Ctrl-C) after the first of its three shards."""
    root = tmp_path_factory.mktemp("damage-istore") / "store"
    real, done = sharded_store._featurize_shard, []

    def stop_after_one(*job):
        if done:
            raise KeyboardInterrupt
        done.append(job)
        return real(*job)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sharded_store, "_featurize_shard", stop_after_one)
        with pytest.raises(KeyboardInterrupt):
            run_cli(["featurize", store_data, "--out", root, *STORE])
    assert len(list((root / "shards").glob("shard-*.pt"))) == 1
    return Built(root, _store_steps(store_data)[1:])


PRETRAIN = ["--model", "gradformer", "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2",
            "--epochs", "1", "--batch-size", "8", "--valid-share", "0.2", "--no-progress", "--device", "cpu"]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("damage-corpus") / "corpus.smi"
    path.write_text("\n".join(freesolv_rows(0, 30)["smiles"]))
    return path


def _pretrain_steps(corpus: Path, data: Path) -> List[Step]:
    resume = Step("pretrain --resume", lambda r, tmp: ["pretrain", corpus, "--out", r, "--resume", *PRETRAIN], _backbone_digest)
    tune = Step("train --from-pretrained", lambda r, tmp: ["train", data, "--targets", "expt", "--out", tmp / "ft",
                                                           "--from-pretrained", r, *FAST],
                lambda r, tmp, out: _text(tmp / "ft" / "test_predictions.csv"))
    return [tune, resume]


@pytest.fixture(scope="session")
def pretrain_folder(corpus, data, tmp_path_factory) -> Built:
    root = tmp_path_factory.mktemp("damage-pretrain") / "pretrained"
    _must(["pretrain", corpus, "--out", root, *PRETRAIN])
    return Built(root, _pretrain_steps(corpus, data))


@contextlib.contextmanager
def _chunks_of_ten() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(descriptor_chunks, "CHUNK_SIZE", 10)
        yield patch


@pytest.fixture(scope="session")
def interrupted_pretrain(corpus, data, tmp_path_factory) -> Built:
    """A pretraining run killed while computing the descriptors of its second chunk of ten."""
    root = tmp_path_factory.mktemp("damage-ipretrain") / "pretrained"
    real, calls = descriptor_chunks.compute_features, []

    def killed_in_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    with _chunks_of_ten() as patch:
        patch.setattr(descriptor_chunks, "compute_features", killed_in_second)
        with pytest.raises(KeyboardInterrupt):
            run_cli(["pretrain", corpus, "--out", root, *PRETRAIN])
    assert len(list((root / descriptor_chunks.CHUNK_FOLDER).glob("rows-*.npz"))) == 1
    return Built(root, _pretrain_steps(corpus, data)[1:], patches=_chunks_of_ten)


@pytest.fixture(scope="session")
def interrupted_predict(run_folder, tmp_path_factory) -> Built:
    """``predict --output`` stopped after two chunks of four molecules: the ``.partial`` and its record."""
    folder = tmp_path_factory.mktemp("damage-predict")
    inputs = folder / "in.csv"
    pd.DataFrame({"smiles": list(freesolv_rows(30, 45)["smiles"]) + ["not a smiles"]}).to_csv(inputs, index=False)
    checkpoint = shutil.copy(run_folder.root / "best.pt", folder / "model.pt")
    root = folder / "output"
    root.mkdir()
    argv = ["predict", "--checkpoint", checkpoint, "--input", inputs, "--chunk-size", "4", "--device", "cpu", "--no-progress"]
    real, calls = Predictor._predict_chunk, []

    def stopped(self, *args):
        calls.append(1)
        if len(calls) > 2:
            raise KeyboardInterrupt
        return real(self, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Predictor, "_predict_chunk", stopped)
        with pytest.raises(KeyboardInterrupt):
            run_cli([*argv, "--output", root / "out.csv"])
    assert sorted(p.name for p in root.iterdir()) == ["out.csv.partial", "out.csv.partial.json"]
    resume = Step("predict --resume", lambda r, tmp: [*argv, "--output", r / "out.csv", "--resume"],
                  lambda r, tmp, out: _text(r / "out.csv"))
    return Built(root, [resume])


# --------------------------------------------------------------------------------------------
# the walks
# --------------------------------------------------------------------------------------------
KINDS = ["run_folder", "ensemble_folder", "cv_folder", "store_folder", "interrupted_store", "pretrain_folder",
         "interrupted_pretrain", "interrupted_predict"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_damaged_file_is_refused_in_one_line_or_recovered(kind, request, tmp_path):
    built = request.getfixturevalue(kind)
    broken = walk(built, tmp_path)
    assert not broken, "\n".join(broken)
