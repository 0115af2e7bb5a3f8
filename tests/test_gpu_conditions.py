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
