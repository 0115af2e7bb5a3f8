"""GPU conditions simulated on the CPU (``torch.cuda`` availability, device counts and DGL's CUDA
support patched): every unsupported combination is one clear error before any work, or a
documented fallback that says what it did; never a crash at the first batch or barrier."""
from __future__ import annotations

import logging

import pytest
import torch

from dgl_graphtx.training.resume import capture_rng_state, restore_rng_state


@pytest.fixture()
def visible_gpus(monkeypatch):
    """``set(n)`` makes torch report ``n`` CUDA devices; CUDA RNG states set per device are
    recorded in the returned list (a device beyond ``n`` raises IndexError, as torch does)."""
    restored = []

    def set_state(state, device="cuda"):
        index = torch.device(device).index if not isinstance(device, int) else device
        index = 0 if index is None else index
        if index >= torch.cuda.device_count():
            raise IndexError("list index out of range")  # what torch raises for a missing device
        restored.append((index, state.clone()))

    def set_count(count: int):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "set_rng_state", set_state)
        monkeypatch.setattr(torch.cuda.random, "set_rng_state", set_state)
        return restored

    return set_count


def _state_with_gpus(count: int) -> dict:
    state = capture_rng_state()
    state["cuda"] = [torch.full((16,), gpu, dtype=torch.uint8) for gpu in range(count)]
    return state


def test_resuming_with_fewer_visible_gpus_restores_what_fits_and_says_so(visible_gpus, caplog):
    """last.pt written with 4 GPUs visible, resumed where 1 is: GPU 0's state is restored, the
    other three are reported, no IndexError (it used to be one)."""
    restored = visible_gpus(1)
    state = _state_with_gpus(4)
    expected_cpu = torch.get_rng_state()
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        restore_rng_state(state)
    assert [(index, s.tolist()) for index, s in restored] == [(0, [0] * 16)]
    assert torch.equal(torch.get_rng_state(), expected_cpu)
    assert "random-number states of 4 GPUs" in caplog.text and "1 GPU is visible" in caplog.text


def test_resuming_without_cuda_keeps_the_cpu_states_and_says_so(visible_gpus, caplog):
    restored = visible_gpus(0)
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        restore_rng_state(_state_with_gpus(2))
    assert restored == [] and "random-number states of 2 GPUs" in caplog.text and "no GPU is visible" in caplog.text


def test_resuming_with_as_many_gpus_restores_them_all_silently(visible_gpus, caplog):
    restored = visible_gpus(2)
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        restore_rng_state(_state_with_gpus(2))
    assert [index for index, _ in restored] == [0, 1] and caplog.text == ""


@pytest.fixture()
def one_gpu_cpu_only_dgl(visible_gpus, monkeypatch):
    """One visible GPU beside a DGL built without CUDA (as pip's default dgl wheel is)."""
    from dgl_graphtx import devices
    visible_gpus(1)
    monkeypatch.setattr(devices, "dgl_cuda_error", lambda: "DGLError: Device API cuda is not enabled")


@pytest.fixture()
def no_featurizing(monkeypatch):
    """Fail the test if a command starts reading or featurizing its data."""
    from cli_runner import must_not_be_called
    from dgl_graphtx.inference import Predictor
    from dgl_graphtx.runs import from_config
    refuse = must_not_be_called("the data was read before the device settings were checked")
    monkeypatch.setattr(from_config, "load_training_data", refuse)
    monkeypatch.setattr(Predictor, "predict", refuse)


def test_a_gpu_index_beyond_the_visible_ones_is_refused(one_gpu_cpu_only_dgl):
    from dgl_graphtx.devices import resolve_device
    from dgl_graphtx.errors import ConfigError
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    with pytest.raises(ConfigError, match=r"device 'cuda:3' requested but torch sees 1 CUDA device \(cuda:0\)"):
        resolve_device("cuda:3")


def test_dgl_compute_on_cuda_with_a_cpu_only_dgl_is_refused(one_gpu_cpu_only_dgl):
    from dgl_graphtx.devices import resolve_compute
    from dgl_graphtx.errors import ConfigError
    assert resolve_compute("auto", "cuda") == "tensors" and resolve_compute("dgl", "cpu") == "dgl"
    with pytest.raises(ConfigError, match="compute='dgl' on cuda needs a CUDA build of DGL.*Device API cuda is not enabled"):
        resolve_compute("dgl", "cuda")


def test_device_mistakes_are_one_line_before_any_work(one_gpu_cpu_only_dgl, no_featurizing, tmp_path):
    from cli_runner import assert_one_error_line, run_cli
    data = tmp_path / "d.csv"
    data.write_text("smiles,y\nCCO,1\nCCN,2\n")
    train = ["train", data, "--targets", "y", "--out", tmp_path / "run"]
    assert_one_error_line(run_cli([*train, "--device", "cuda:3"]), "cuda:3", "torch sees 1 CUDA device")
    assert_one_error_line(run_cli([*train, "--device", "cuda", "--set", "train.compute=dgl"]),
                          "compute='dgl' on cuda", "compute='tensors'")
    assert not (tmp_path / "run").exists()
    assert_one_error_line(run_cli(["predict", "--checkpoint", tmp_path / "none.pt", "--device", "cuda:3", "CCO"]),
                          "torch sees 1 CUDA device")


@pytest.fixture()
def no_launch(monkeypatch):
    """Fail the test if a command starts the processes of a distributed run."""
    from cli_runner import must_not_be_called
    from dgl_graphtx.cli import pretrain, train
    refuse = must_not_be_called("the processes were started before the devices were checked")
    monkeypatch.setattr(train, "launch_local", refuse)
    monkeypatch.setattr(pretrain, "launch_local", refuse)


def test_more_processes_than_gpus_are_refused_before_they_start(visible_gpus, no_launch, tmp_path):
    """Two processes on one GPU used to both get cuda:0, which NCCL refuses at the first barrier."""
    from cli_runner import assert_one_error_line, run_cli
    from dgl_graphtx.errors import ConfigError
    from dgl_graphtx.runs.distributed import local_device
    visible_gpus(1)
    assert local_device("auto", 0, 1) == torch.device("cuda", 0)
    with pytest.raises(ConfigError, match="2 processes on this machine need one GPU each, but torch sees 1"):
        local_device("auto", 1, 2)
    with pytest.raises(ConfigError, match="puts all 2 processes on one GPU"):
        local_device("cuda:0", 1, 2)
    assert local_device("cpu", 1, 2) == torch.device("cpu")
    data = tmp_path / "d.csv"
    data.write_text("smiles,y\nCCO,1\nCCN,2\n")
    assert_one_error_line(run_cli(["train", data, "--targets", "y", "--out", tmp_path / "r", "--nproc", "2"]),
                          "need one GPU each, but torch sees 1", "--device cpu")
    assert_one_error_line(run_cli(["pretrain", data, "--out", tmp_path / "p", "--nproc", "2", "--device", "cuda"]),
                          "need one GPU each")
    assert not (tmp_path / "r").exists() and not (tmp_path / "p").exists()
