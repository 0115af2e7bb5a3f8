"""The lean layers compute what the ``torch.nn`` layers they replace compute (values, gradients,
running statistics, state-dict keys), with fewer dispatched operations."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dgl_graphtx.nn import lean


class CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def _ops(fn) -> int:
    counter = CountOps()
    with counter:
        fn()
    return counter.ops


def _grads(module: torch.nn.Module, x: torch.Tensor, weight: torch.Tensor):
    x = x.clone().requires_grad_(True)
    out = module(x)
    (out * weight).sum().backward()
    return out.detach(), x.grad, [p.grad.clone() for p in module.parameters()]


@pytest.mark.parametrize("bias", [True, False])
def test_linear_equals_torch_linear_with_fewer_backward_operations(bias):
    torch.manual_seed(0)
    ours = lean.Linear(5, 3, bias=bias).double()
    reference = torch.nn.Linear(5, 3, bias=bias).double()
    reference.load_state_dict(ours.state_dict())
    assert list(ours.state_dict()) == list(reference.state_dict())
    x, w = torch.randn(7, 5, dtype=torch.float64), torch.randn(7, 3, dtype=torch.float64)
    got, expected = _grads(ours, x, w), _grads(reference, x, w)
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(got[1], expected[1], rtol=0, atol=1e-12)
    for a, b in zip(got[2], expected[2]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    x = torch.randn(7, 5, dtype=torch.float64, requires_grad=True)
    ours(x)  # the transposed weight is made once
    lean_ops = _ops(lambda: ours(x).sum().backward())
    torch_ops = _ops(lambda: reference(x).sum().backward())
    assert lean_ops < torch_ops, (lean_ops, torch_ops)


def test_linear_follows_its_weight_to_a_new_storage_and_type():
    layer = lean.Linear(4, 2)
    x = torch.randn(3, 4)
    layer(x)
    with torch.no_grad():
        layer.weight.mul_(2.0)  # in place, as optimizers do: the kept view sees it
    torch.testing.assert_close(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
    layer.load_state_dict({"weight": torch.ones(2, 4), "bias": torch.zeros(2)}, assign=True)
    torch.testing.assert_close(layer(x), x.sum(1, keepdim=True).expand(3, 2))
    layer = layer.double()
    torch.testing.assert_close(layer(x.double()), x.double().sum(1, keepdim=True).expand(3, 2))


def test_linear_takes_other_input_shapes_and_second_derivatives():
    layer = lean.Linear(4, 2).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    torch.testing.assert_close(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(torch.tanh(layer(x)).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(grad.sum(), x)
    x_ref = x.detach().clone().requires_grad_(True)
    (grad_ref,) = torch.autograd.grad(torch.tanh(torch.nn.functional.linear(x_ref, layer.weight, layer.bias)).sum(),
                                      x_ref, create_graph=True)
    (second_ref,) = torch.autograd.grad(grad_ref.sum(), x_ref)
    torch.testing.assert_close(second, second_ref)


def test_stacked_linear_equals_each_layer_and_sends_gradients_to_each():
    torch.manual_seed(1)
    layers = [lean.Linear(4, 3).double() for _ in range(3)]
    x = torch.randn(6, 4, dtype=torch.float64)
    w = torch.randn(6, 9, dtype=torch.float64)
    (lean.stacked_linear(layers, x) * w).sum().backward()
    stacked = [p.grad.clone() for layer in layers for p in layer.parameters()]
    for layer in layers:
        layer.zero_grad()
    (torch.cat([layer(x) for layer in layers], -1) * w).sum().backward()
    for a, layer_grads in zip(stacked, [p.grad for layer in layers for p in layer.parameters()]):
        torch.testing.assert_close(a, layer_grads, rtol=0, atol=1e-12)
    mixed = [lean.Linear(4, 3), lean.Linear(4, 2)]  # unequal shapes: concatenated
    assert lean.stacked_linear(mixed, torch.randn(5, 4)).shape == (5, 5)
    with pytest.raises(ValueError, match="all have a bias"):
        lean.stacked_linear([lean.Linear(4, 3), lean.Linear(4, 3, bias=False)], torch.randn(5, 4))


@pytest.mark.parametrize("size", [50_000, 2 * lean.LANE_DROPOUT_MIN + 3])  # native_dropout, lanes of random words
def test_dropout_drops_with_its_probability_and_keeps_the_expectation(size):
    drop = lean.Dropout(0.3).train()
    x = torch.ones(size, dtype=torch.float64)
    out = drop(x)
    assert set(out.unique().tolist()) == pytest.approx([0.0, 1 / 0.7], rel=1e-4)
    dropped = (out == 0).double()
    assert abs(float(out.mean()) - 1.0) < 0.01 and abs(float(dropped.mean()) - 0.3) < 0.01
    if size > lean.LANE_DROPOUT_MIN:  # the lanes of one word are independent draws
        pairs = dropped[: size // 4 * 4].view(-1, 4)
        assert abs(float((pairs[:, 0] * pairs[:, 3]).mean()) - 0.09) < 0.01
    y = torch.randn(size, requires_grad=True)
    out = drop(y)
    out.backward(torch.full_like(out, 2.0))
    torch.testing.assert_close(y.grad, 2.0 * out.detach() / y.detach())  # kept entries: scaled; dropped: 0


def test_dropout_acts_in_training_only():
    drop = lean.Dropout(0.3).train()
    x = torch.ones(200_000, dtype=torch.float64)
    assert drop.eval()(x) is x
    assert torch.equal(lean.Dropout(1.0).train()(x), torch.zeros_like(x))
    assert lean.Dropout(0.0).train()(x) is x
    y = torch.randn(50, 4, requires_grad=True)
    torch.manual_seed(3)
    out = lean.Dropout(0.5).train()(y)
    out.sum().backward()
    assert torch.equal(y.grad, (out != 0).float() * 2.0)  # the gradient goes through the kept entries, scaled


def test_batch_norm_equals_torch_batch_norm_in_both_modes():
    torch.manual_seed(2)
    ours, reference = lean.BatchNorm1d(4).double(), torch.nn.BatchNorm1d(4).double()
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
        ours.bias.uniform_(-1, 1)
    reference.load_state_dict(ours.state_dict())
    for _ in range(3):
        x, w = torch.randn(9, 4, dtype=torch.float64), torch.randn(9, 4, dtype=torch.float64)
        got, expected = _grads(ours, x, w), _grads(reference, x, w)
        for a, b in zip([got[0], got[1], *got[2]], [expected[0], expected[1], *expected[2]]):
            torch.testing.assert_close(a, b)
        ours.zero_grad()
        reference.zero_grad()
    torch.testing.assert_close(ours.running_mean, reference.running_mean)
    torch.testing.assert_close(ours.running_var, reference.running_var)
    x = torch.randn(5, 4, dtype=torch.float64)
    torch.testing.assert_close(ours.eval()(x), reference.eval()(x))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        ours.train()(x[:1])
