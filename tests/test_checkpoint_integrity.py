"""Checkpoint integrity: content checksums, validated metadata,
bounded sizes, no checkpoint from non-finite weights, no advice to disable safe loading."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
import torch

from conftest_models import seeded_model, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, content_checksum, load_checkpoint, save_checkpoint
from dgl_graphtx.errors import CheckpointError, ConfigError
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.inference import predict_smiles


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A one-output vanilla model (1 layer, width 16) saved with target ``y``."""
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    model = seeded_model(preset, seed=4)
    path = save_checkpoint(tmp_path_factory.mktemp("ckpt") / "m.pt", model, CheckpointMeta(preset.featurizer, preset.relation, ["y"]))
    return preset, model, path


def _payload(path):
    return torch.load(path, weights_only=True)


def _write(payload, path, seal=True):
    """Save ``payload``; with ``seal`` its checksum is recomputed so only the edit is tested."""
    if seal:
        payload = {**payload, "checksum": content_checksum(payload)}
    torch.save(payload, path)
    return path


def _largest_tensor_span(path: Path):
    """(offset, size) in the file of the largest stored tensor's raw bytes (zip entries are stored
    uncompressed by torch, so its bytes lie contiguously after the local file header)."""
    with zipfile.ZipFile(path) as archive:
        info = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    raw = path.read_bytes()
    header = info.header_offset
    name_len = int.from_bytes(raw[header + 26:header + 28], "little")
    extra_len = int.from_bytes(raw[header + 28:header + 30], "little")
    return header + 30 + name_len + extra_len, info.file_size


# --------------------------------------------------------------------------------------------
# content checksum
# --------------------------------------------------------------------------------------------
def test_one_flipped_byte_in_tensor_data_is_detected(saved, tmp_path):
    _, _, path = saved
    offset, size = _largest_tensor_span(path)
    raw = bytearray(path.read_bytes())
    raw[offset + size // 2] ^= 0x10
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(bytes(raw))
    # torch itself reads the damaged file without complaint: only the checksum can catch it
    assert isinstance(torch.load(damaged, weights_only=True)["state_dict"], dict)
    with pytest.raises(CheckpointError, match="damaged") as info:
        load_checkpoint(damaged)
    assert str(damaged) in str(info.value)
    with pytest.raises(CheckpointError, match="damaged"):
        predict_smiles(["CCO"], damaged)


def test_edited_metadata_is_detected_by_the_checksum(saved, tmp_path):
    _, _, path = saved
    payload = _payload(path)
    payload["extra"] = {"epoch": 99}
    with pytest.raises(CheckpointError, match="damaged"):
        load_checkpoint(_write(payload, tmp_path / "edited.pt", seal=False))


def test_checkpoint_without_checksum_loads_with_a_warning(saved, tmp_path):
    preset, model, path = saved
    payload = _payload(path)
    del payload["checksum"], payload["featurization_version"]
    old = _write(payload, tmp_path / "old.pt", seal=False)
    with pytest.warns(UserWarning) as caught:
        loaded = load_checkpoint(old)
    messages = [str(w.message) for w in caught]
    assert any("cannot be verified" in m for m in messages)
    assert any("CW/CCW chirality" in m and "Retrain" in m for m in messages)  # features changed since
    assert all(torch.equal(loaded.model.state_dict()[k], v) for k, v in model.state_dict().items())


def test_intact_checkpoint_loads_without_warnings(saved):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_checkpoint(saved[2]).meta.target_names == ["y"]


def test_checksum_covers_every_tensor_byte_and_the_metadata():
    base = {"state_dict": {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, "target_names": ["y"]}
    reference = content_checksum(base)
    changed_value = {**base, "state_dict": {"w": base["state_dict"]["w"].clone().index_fill_(1, torch.tensor([2]), 9.0)}}
    reshaped = {**base, "state_dict": {"w": base["state_dict"]["w"].reshape(3, 2)}}
    retyped = {**base, "state_dict": {"w": base["state_dict"]["w"].double()}}
    renamed = {**base, "target_names": ["z"]}
    for other in (changed_value, reshaped, retyped, renamed):
        assert content_checksum(other) != reference
    assert content_checksum({**base, "checksum": "anything"}) == reference


# --------------------------------------------------------------------------------------------
# metadata validated before use, sizes bounded before allocation
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "names, fragment",
    [(["a", "b"], "2 target names"), ("expt", "list of names"), ([], "0 target names"), ([""], "non-empty"), ([3], "non-empty")],
)
def test_target_names_that_do_not_fit_the_model_are_refused(saved, tmp_path, names, fragment):
    payload = {**_payload(saved[2]), "target_names": names}
    with pytest.raises(CheckpointError, match=fragment):
        load_checkpoint(_write(payload, tmp_path / "names.pt"))


def test_save_refuses_metadata_that_does_not_fit(saved, tmp_path):
    preset, model, _ = saved
    for names in (["a", "a"], "y", []):
        with pytest.raises(ConfigError):
            save_checkpoint(tmp_path / "x.pt", model, CheckpointMeta(preset.featurizer, preset.relation, names))
    canonical = FeaturizerConfig(atom_features="canonical")
    with pytest.raises(ConfigError, match="featurization does not match"):
        save_checkpoint(tmp_path / "x.pt", model, CheckpointMeta(canonical, preset.relation, ["y"]))
    assert not (tmp_path / "x.pt").exists()


def test_featurizer_not_matching_the_model_is_a_clear_error(saved, tmp_path):
    payload = _payload(saved[2])
    payload["featurizer"] = {**payload["featurizer"], "atom_features": "canonical"}
    with pytest.raises(CheckpointError, match="featurization does not match the model"):
        load_checkpoint(_write(payload, tmp_path / "feat.pt"))
    payload = _payload(saved[2])
    payload["relation"] = {**payload["relation"], "virtual_node": False}
    with pytest.raises(CheckpointError, match="virtual_node"):
        load_checkpoint(_write(payload, tmp_path / "vn.pt"))


@pytest.mark.parametrize("key, value, fragment", [
    ("num_layers", 200_000, "num_layers must be an integer in [1, 256]"),
    ("hidden_dim", 10 ** 9, "hidden_dim must be an integer in [1, 16384]"),
    ("num_tasks", -1, "num_tasks"),
    ("atom_feature_dims", [10 ** 12], "atom_feature_dims"),
])
def test_hostile_sizes_are_refused_before_building(saved, tmp_path, key, value, fragment):
    payload = _payload(saved[2])
    payload["model_config"] = {**payload["model_config"], key: value}
    with pytest.raises(CheckpointError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        load_checkpoint(_write(payload, tmp_path / "hostile.pt"))


def test_large_config_with_small_weights_allocates_nothing(saved, tmp_path):
    """A small file asking for a ~1.6 GB model: refused by the shape check, before allocation."""
    payload = _payload(saved[2])
    payload["model_config"] = {**payload["model_config"], "hidden_dim": 1024, "num_heads": 8, "num_layers": 32, "ffn_dim": 4096}
    path = _write(payload, tmp_path / "big.pt")
    code = (
        "import resource, sys\n"
        "from dgl_graphtx.checkpoint import load_checkpoint\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n    load_checkpoint(sys.argv[1])\nexcept Exception as err:\n    print(type(err).__name__, err)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120, env=env)
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("CheckpointError") and "weights do not fit" in lines[0], done.stdout + done.stderr
    assert int(lines[-1]) < 200, f"peak memory grew by {lines[-1]} MiB while refusing the file"


# --------------------------------------------------------------------------------------------
# never write a checkpoint from non-finite weights
# --------------------------------------------------------------------------------------------
def test_non_finite_weights_are_never_written(saved, tmp_path):
    preset, model, _ = saved
    meta = CheckpointMeta(preset.featurizer, preset.relation, ["y"])
    path = save_checkpoint(tmp_path / "best.pt", model, meta)
    before = path.read_bytes()
    broken = seeded_model(preset, seed=5)
    with torch.no_grad():
        next(broken.parameters()).view(-1)[0] = float("nan")
    with pytest.raises(CheckpointError, match="NaN or inf"):
        save_checkpoint(path, broken, meta)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.pt"]


# --------------------------------------------------------------------------------------------
# never suggest weights_only=False
# --------------------------------------------------------------------------------------------
class _Executable:
    def __reduce__(self):
        return (print, ("this would run",))


def test_unpickling_error_never_suggests_weights_only_false(tmp_path):
    path = tmp_path / "evil.pt"
    buffer = io.BytesIO()
    torch.save({"kind": "dgl_graphtx-checkpoint", "x": _Executable()}, buffer)
    path.write_bytes(buffer.getvalue())
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "weights_only" not in message and "False" not in message
    assert "could run code" in message and str(path) in message
    json.dumps(message)  # one printable line
    assert "\n" not in message
