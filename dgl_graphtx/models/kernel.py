"""A fingerprint kernel beside the network: kernel ridge regression with the Tanimoto (MinMax)
kernel on count fingerprints, blended with the network's prediction.

Kernel ridge regression with this kernel is the posterior mean of a Gaussian process on
fingerprints, a classic of activity modelling: on small activity sets it is hard to beat (on
MoleculeACE's development half it is ahead of every published model, CheMeleon included; see
docs/decisions/fingerprint-kernel.md). The network still sees what fingerprints miss (geometry,
long-range structure, large data sets). The two are blended per task,
``w * network + (1 - w) * kernel``, in target units, with the ridge ``alpha`` chosen by the
kernel's leave-one-out error and the weight ``w`` on the validation part
(:func:`fit_fingerprint_kernel`), so a kernel that does not help gets ``w = 1``. For
classification the kernel's values (a regression on 0/1 labels, which strays outside [0, 1]) are
made probabilities by Platt scaling fitted on their leave-one-out values (:func:`fit_platt`), and
the two are blended in logits (log-linear pooling), ``w`` chosen by the validation log-loss.

The kernel of two count vectors ``a, b`` is ``sum(min(a, b)) / sum(max(a, b))``, computed as
``(S - D) / (S + D)`` with ``S = |a|_1 + |b|_1`` and ``D = |a - b|_1``; two empty fingerprints have
similarity 0, as in RDKit. With several fingerprints side by side (``segments``, their bins in
order: Morgan, atom-pair and Avalon counts by default), the kernel is the mean of one such
similarity per fingerprint, still a kernel (a mean of positive semi-definite ones).

Example:
    >>> import torch
    >>> train = torch.tensor([[2.0, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 3]])
    >>> fit = fit_fingerprint_kernel(train[:3], torch.tensor([[1.0], [2.0], [3.0]]), train[3:],
    ...                              torch.tensor([[2.5]]), torch.tensor([[2.0]]))
    >>> kernel = FingerprintKernel.from_fit(fit)
    >>> kernel.predictions(train[:1]).shape, kernel.weight.tolist()
    (torch.Size([1, 1]), [1.0])
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import torch
from torch import nn

from ..errors import ConfigError

#: The tasks a fingerprint kernel is fitted for (a multiclass model has none).
KERNEL_TASKS = ("regression", "classification")
#: Ridges tried, by leave-one-out error (the kernel matrix has ones on its diagonal).
ALPHAS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
#: Blend weights of the network tried on the validation part.
WEIGHTS = tuple(i / 20 for i in range(21))
#: Fewest labelled validation molecules a blend weight is chosen on without a warning: on fewer,
#: some weight between the network and the kernel fits them almost exactly, whatever its worth.
FEW_VALIDATION = 5
#: Most training molecules the kernel keeps (a seeded draw above it): kernel matrices of
#: 5,000 molecules take 200 MB in float64 and a few seconds to solve.
MAX_REFERENCES = 5000


def minmax_kernel(a: torch.Tensor, b: torch.Tensor, levels: Optional[int] = None) -> torch.Tensor:
    """Tanimoto similarity of count fingerprints ``a`` ``[M, F]`` to ``b`` ``[R, F]``: ``[M, R]`` in
    the dtype of ``a`` (float32 or float64).

    For integer counts ``sum(min(a, b)) = sum_c (a >= c) . (b >= c)`` over the counts ``c`` up to
    the largest of ``b``; each level is a product of a sparse matrix (fingerprints have a few dozen
    bins set) with a dense one, exact and ~25x faster than a dense L1 distance. With ``levels``
    (at least the largest count of ``b``), dense products alone: what ``torch.export`` and ONNX
    can express.

    Example:
        >>> minmax_kernel(torch.tensor([[1.0, 2, 0], [0, 0, 0]]), torch.tensor([[1.0, 1, 1], [0, 0, 0]])).tolist()
        [[0.5, 0.0], [0.0, 0.0]]
    """
    dtype = a.dtype if a.dtype in (torch.float32, torch.float64) else torch.float32
    a, b = a.to(dtype), b.to(dtype)
    if levels is not None:
        shared = a.new_zeros(a.shape[0], b.shape[0])
        for count in range(1, levels + 1):
            shared = shared + (a >= count).to(dtype) @ (b >= count).to(dtype).T
        return _minmax(a, b.sum(dim=1), shared)
    return minmax_from_levels(a, count_levels(b), b.sum(dim=1))


def count_levels(b: torch.Tensor) -> List[torch.Tensor]:
    """``(b >= c)`` for ``c = 1 ..`` the largest count of ``b`` ``[R, F]``, as sparse ``[R, F]``
    matrices in ``b``'s dtype (what :func:`minmax_from_levels` compares queries with)."""
    top = int(b.max()) if b.numel() else 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch calls its sparse CSR support beta
        return [(b >= count).to(b.dtype).to_sparse_csr() for count in range(1, top + 1)]


def minmax_from_levels(a: torch.Tensor, levels: Sequence[torch.Tensor], b_sum: torch.Tensor) -> torch.Tensor:
    """:func:`minmax_kernel` of ``a`` ``[M, F]`` with the references whose :func:`count_levels` and
    row sums ``b_sum`` are given."""
    shared = a.new_zeros(len(b_sum), a.shape[0])
    for count, level in enumerate(levels, 1):
        above = a >= count
        if not bool(above.any()):
            break
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch calls its sparse CSR support beta
            shared = shared + level @ above.to(a.dtype).T
    return _minmax(a, b_sum, shared.T)


def _minmax(a: torch.Tensor, b_sum: torch.Tensor, shared: torch.Tensor) -> torch.Tensor:
    """``shared / (|a| + |b| - shared)``: the Tanimoto similarity from the summed minima ``[M, R]``."""
    return shared / (a.sum(dim=1)[:, None] + b_sum[None] - shared).clamp_min(1e-9)


def segment_slices(segments: Sequence[int], size: int) -> List[slice]:
    """The columns of each fingerprint of ``segments`` (their bins, in order) among ``size``; one
    slice of all of them when ``segments`` is empty.

    Example:
        >>> segment_slices((4, 2), 6)
        [slice(0, 4, None), slice(4, 6, None)]
    """
    if not segments:
        return [slice(0, size)]
    if sum(segments) != size:
        raise ConfigError(f"the fingerprint kernel's segments {tuple(segments)} must add up to its {size} bins")
    ends = [sum(segments[: i + 1]) for i in range(len(segments))]
    return [slice(end - width, end) for end, width in zip(ends, segments)]


def mean_minmax_kernel(a: torch.Tensor, b: torch.Tensor, segments: Sequence[int] = (), levels: Optional[int] = None) -> torch.Tensor:
    """The mean over fingerprints (``segments``, see :func:`segment_slices`) of :func:`minmax_kernel`
    of ``a`` ``[M, F]`` to ``b`` ``[R, F]`` (with its ``levels``): ``[M, R]``.

    Example:
        >>> a, b = torch.tensor([[1.0, 1, 2, 0]]), torch.tensor([[1.0, 0, 1, 1]])
        >>> round(float(mean_minmax_kernel(a, b, (2, 2))), 4)  # (1/2 + 1/3) / 2
        0.4167
    """
    return _mean([minmax_kernel(a[:, part], b[:, part], levels) for part in segment_slices(segments, a.shape[1])])


def _mean(similarities: List[torch.Tensor]) -> torch.Tensor:
    """The mean of one similarity matrix per fingerprint (one alone, as it is)."""
    return similarities[0] if len(similarities) == 1 else torch.stack(similarities).mean(dim=0)


def fit_platt(scores: torch.Tensor, labels: torch.Tensor, iterations: int = 100) -> Tuple[float, float]:
    """Platt scaling: ``(a, b)`` such that ``sigmoid(a * score + b)`` is the probability of the
    positive class, fitted by maximum likelihood on 0/1 ``labels`` with Platt's smoothed targets
    (``(N+ + 1) / (N+ + 2)`` for positives, ``1 / (N- + 2)`` for negatives, so that separable
    scores give a finite fit), by Newton's method with step halving (Lin, Lin & Weng 2007).

    The slope is kept at least 0 (the best non-decreasing scaling): scores that rise with the
    positive class are never turned upside down. Where the unconstrained fit's slope is negative,
    as for leave-one-out scores of a kernel with little signal (leaving a positive out lowers what
    the others predict for it), the fit is the constant ``a = 0``, ``sigmoid(b)`` the smoothed
    targets' mean.

    Example:
        >>> a, b = fit_platt(torch.tensor([0.0, 0.2, 0.4, 0.6, 0.8, 1.0]), torch.tensor([0.0, 0, 1, 0, 1, 1]))
        >>> round(a, 2), round(b, 2)
        (2.68, -1.34)
    """
    x, y = scores.to(torch.float64), labels.to(torch.float64)
    positives = float(y.sum())
    targets = torch.where(y > 0.5, torch.tensor((positives + 1) / (positives + 2), dtype=torch.float64),
                          torch.tensor(1 / (len(y) - positives + 2), dtype=torch.float64))
    design = torch.stack([x, torch.ones_like(x)], dim=1)

    def loss(params: torch.Tensor) -> float:
        z = design @ params
        return float((torch.nn.functional.softplus(z) - targets * z).sum())

    params = torch.tensor([0.0, math.log((positives + 1) / (len(y) - positives + 1))], dtype=torch.float64)
    current = loss(params)
    for _ in range(iterations):
        p = torch.sigmoid(design @ params)
        gradient = design.T @ (p - targets)
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + 1e-12 * torch.eye(2, dtype=torch.float64)
        step = torch.linalg.solve(hessian, gradient)
        decrease, size = float(gradient @ step), 1.0  # the loss falls by about size * decrease
        while size > 1e-10 and loss(params - size * step) > current - 1e-4 * size * decrease:
            size /= 2
        if size <= 1e-10 or decrease < 1e-20:
            break
        params = params - size * step
        current = loss(params)
    if float(params[0]) < 0:  # the loss is convex: the best slope >= 0 is then 0
        mean = float(targets.mean())
        return 0.0, math.log(mean / (1 - mean))
    return float(params[0]), float(params[1])


@dataclass
class KernelFit:
    """What :func:`fit_fingerprint_kernel` chose and fitted, per task: the references kept, their
    dual coefficients ``[R, T]``, the intercepts ``[T]``, the network's blend weights ``[T]``, the
    ridges, and the validation errors of the network, the kernel and the blend (mean squared; the
    mean log-loss for classification); for classification the Platt scaling ``[T, 2]`` (``a, b`` of
    ``sigmoid(a * value + b)``) making the kernel's values probabilities (``None`` for regression);
    the bins of each fingerprint the references hold side by side (``segments``; empty: one).

    Example:
        >>> fit = KernelFit(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), torch.tensor([0.5]), [0.1],
        ...                 [0.3], [0.2], [0.18], [12], platt=torch.tensor([[2.0, -1.0]]))
        >>> fit.log_loss
        True
    """

    references: torch.Tensor
    coefficients: torch.Tensor
    intercept: torch.Tensor
    weight: torch.Tensor
    alphas: List[float]
    validation_network: List[float]
    validation_kernel: List[float]
    validation_blend: List[float]
    validation_counts: List[int] = field(default_factory=list)
    platt: Optional[torch.Tensor] = None
    segments: Tuple[int, ...] = ()

    @property
    def log_loss(self) -> bool:
        """Whether the validation errors are log-losses (a classification fit, blended in logits)."""
        return self.platt is not None


def _mse(y: torch.Tensor, p: torch.Tensor) -> float:
    return float(((y - p) ** 2).mean())


def _log_loss(y: torch.Tensor, logits: torch.Tensor) -> float:
    """The mean log-loss of 0/1 labels ``y`` under ``sigmoid(logits)``."""
    return float(torch.nn.functional.binary_cross_entropy_with_logits(logits, y))


#: Network probabilities are read back as logits within these bounds (a float32 sigmoid saturates).
PROBABILITY_BOUNDS = (1e-6, 1 - 1e-6)


def fit_fingerprint_kernel(train_fps: torch.Tensor, train_y: torch.Tensor, valid_fps: torch.Tensor, valid_y: torch.Tensor,
                           valid_network: torch.Tensor, alphas: Sequence[float] = ALPHAS, weights: Sequence[float] = WEIGHTS,
                           max_references: int = MAX_REFERENCES, seed: int = 0, probabilities: bool = False,
                           segments: Sequence[int] = ()) -> KernelFit:
    """Fit the kernel model on the training and validation molecules and its blend with the
    network, task by task.

    For each task, on its labelled molecules (NaN labels are left out): the ridge is the one of
    ``alphas`` with the smallest leave-one-out error; the network's weight the one of ``weights``
    with the smallest validation error of ``w * valid_network + (1 - w) * kernel``, the kernel's
    validation predictions being its leave-one-out ones. Molecules of one fingerprint (the same
    molecule in several rows, stereoisomers) are left out together: left in, each copy would
    predict its twins from their own labels, which no new molecule has. Without labelled
    validation molecules the kernel is not used (weight 1).

    Args:
        train_fps, valid_fps: count fingerprints ``[N, F]`` and ``[V, F]``.
        train_y, valid_y: targets ``[N, T]`` and ``[V, T]`` in target units (0/1 for
            classification), NaN where missing.
        valid_network: the network's validation predictions ``[V, T]`` in target units.
        max_references: above this many training + validation molecules, a seeded draw of this
            many is kept.
        probabilities: classification (``valid_network`` holds probabilities): the kernel's
            values become probabilities by Platt scaling (:func:`fit_platt`) of their leave-one-out
            values, and the weight is the one of the smallest validation log-loss of the blend in
            logits, ``sigmoid(w * logit(network) + (1 - w) * logit(kernel))``.
        segments: the bins of each count fingerprint held side by side in the fingerprints (see
            :func:`mean_minmax_kernel`); empty: one fingerprint.
    """
    fps = torch.cat([train_fps, valid_fps]).to(torch.float64)
    labels = torch.cat([train_y, valid_y]).to(torch.float64)
    network = torch.cat([torch.full_like(train_y, float("nan")), valid_network]).to(torch.float64)
    is_train = torch.arange(len(fps)) < len(train_fps)
    if len(fps) > max_references:
        keep = torch.randperm(len(fps), generator=torch.Generator().manual_seed(seed))[:max_references].sort().values
        fps, labels, network, is_train = fps[keep], labels[keep], network[keep], is_train[keep]
    kernel = mean_minmax_kernel(fps.float(), fps.float(), segments).double()  # float32 sums of counts are exact, and twice as fast
    groups = torch.unique(fps, dim=0, return_inverse=True)[1]
    tasks = [_fit_task(kernel, labels[:, t], network[:, t], is_train, groups, alphas, weights, probabilities)
             for t in range(labels.shape[1])]
    coefficients = torch.stack([t.coefficients for t in tasks], dim=1)
    return KernelFit(fps.clamp(max=255).to(torch.uint8), coefficients.float(),
                     torch.tensor([t.intercept for t in tasks]), torch.tensor([t.weight for t in tasks]),
                     [t.alpha for t in tasks], [t.error_network for t in tasks], [t.error_kernel for t in tasks],
                     [t.error_blend for t in tasks], [t.validation_count for t in tasks],
                     torch.tensor([t.platt for t in tasks]) if probabilities else None, tuple(segments))


@dataclass
class _TaskFit:
    coefficients: torch.Tensor
    intercept: float = 0.0
    weight: float = 1.0
    alpha: float = float("nan")
    error_network: float = float("nan")
    error_kernel: float = float("nan")
    error_blend: float = float("nan")
    validation_count: int = 0
    platt: Tuple[float, float] = (1.0, 0.0)


def _fit_task(kernel: torch.Tensor, labels: torch.Tensor, network: torch.Tensor, is_train: torch.Tensor,
              groups: torch.Tensor, alphas: Sequence[float], weights: Sequence[float], probabilities: bool = False) -> _TaskFit:
    """One task of :func:`fit_fingerprint_kernel` (rows: training then validation molecules;
    ``groups``: the same number for rows of the same fingerprint).

    The ridge is chosen by the leave-one-out error over all labelled molecules, which kernel ridge
    regression gives in closed form (``y_i - c_i / H_ii`` with ``H = (K + alpha I)^-1``, and for a
    group ``G`` of rows of one fingerprint, left out together, ``y_G - H_GG^-1 c_G``; the
    intercept, the labels' mean, is kept), from one eigendecomposition for every ridge. The
    network's weight is chosen on the validation molecules against those left-out predictions,
    which come from a kernel almost as strong as the one kept (fitted on all molecules but one and
    its twins).
    With ``probabilities`` those values are Platt-scaled first (the scaling fitted on all of them),
    and the weight is chosen by the validation log-loss of the blend in logits; where the scaling
    is flat (the scores do not rise with the labels, see :func:`fit_platt`) the kernel is not used
    (weight 1).
    """
    known = ~torch.isnan(labels)
    fitted = torch.nonzero(known).flatten()
    validation = ~is_train[fitted]
    count = int(validation.sum())
    if not count or len(fitted) < 3:
        return _TaskFit(torch.zeros(len(labels), dtype=torch.float64), validation_count=count)
    y = labels[fitted]
    mean = y.mean()
    eigenvalues, vectors = torch.linalg.eigh(kernel[fitted][:, fitted])
    projected = vectors.T @ (y - mean)
    _, group, size = torch.unique(groups[fitted], return_inverse=True, return_counts=True)
    shared = [torch.nonzero(group == g).flatten() for g in torch.nonzero(size > 1).flatten().tolist()]
    scored = []
    for alpha in alphas:
        inverse = 1.0 / (eigenvalues.clamp_min(0.0) + alpha)
        dual = vectors @ (inverse * projected)
        left_out = y - dual / ((vectors ** 2) @ inverse)
        for rows in shared:
            left_out[rows] = y[rows] - torch.linalg.solve((vectors[rows] * inverse) @ vectors[rows].T, dual[rows])
        scored.append((_mse(y, left_out), alpha, dual, left_out))
    _, alpha, dual, left_out = min(scored, key=lambda item: item[0])
    y_valid, net, kernel_valid = y[validation], network[fitted][validation], left_out[validation]
    platt = (1.0, 0.0)
    if probabilities:  # the blend and its error in logits
        platt = fit_platt(left_out, y)
        net, kernel_valid = torch.logit(net.clamp(*PROBABILITY_BOUNDS)), platt[0] * kernel_valid + platt[1]
    error = _log_loss if probabilities else _mse
    # a flat scaling (no signal) would only flatten the network's ranking (at weight 0, tie it): the network alone
    tried = weights if platt[0] != 0.0 else (1.0,)
    error_blend, weight = min((error(y_valid, w * net + (1 - w) * kernel_valid), w) for w in tried)
    coefficients = torch.zeros(len(labels), dtype=torch.float64)
    coefficients[fitted] = dual
    return _TaskFit(coefficients, float(mean), weight, alpha, error(y_valid, net), error(y_valid, kernel_valid), error_blend,
                    count, platt)


class FingerprintKernel(nn.Module):
    """The fitted kernel model of :func:`fit_fingerprint_kernel`, as buffers saved with the model:
    reference fingerprints (uint8 counts ``[R, F]``), dual coefficients ``[R, T]``, intercepts and
    the network's blend weights ``[T]``; with ``probabilities`` (classification) also the Platt
    scaling ``[T, 2]`` that makes its values probabilities, and with ``logit_blend`` (classification
    kernels fitted since log-linear pooling; earlier ones blend probabilities) the blend is in logits.
    ``segments``: the bins of each count fingerprint the references hold side by side (the kernel
    is the mean of one similarity per fingerprint); empty: one fingerprint.

    Example:
        >>> kernel = FingerprintKernel(references=3, size=4, tasks=2)
        >>> kernel.predictions(torch.ones(5, 4)).shape
        torch.Size([5, 2])
        >>> FingerprintKernel(references=3, size=4, tasks=1, probabilities=True).predictions(torch.ones(1, 4))
        tensor([[0.5000]])
    """

    references: torch.Tensor
    coefficients: torch.Tensor
    intercept: torch.Tensor
    weight: torch.Tensor
    platt: Optional[torch.Tensor]

    def __init__(self, references: int, size: int, tasks: int, probabilities: bool = False, logit_blend: bool = False,
                 segments: Sequence[int] = ()) -> None:
        super().__init__()
        if logit_blend and not probabilities:
            raise ConfigError("a fingerprint kernel blends in logits only with probabilities (Platt scaling)")
        self.logit_blend = logit_blend
        self.segments = tuple(int(s) for s in segments)
        self.slices = segment_slices(self.segments, size)
        self.register_buffer("references", torch.zeros(references, size, dtype=torch.uint8))
        self.register_buffer("coefficients", torch.zeros(references, tasks))
        self.register_buffer("intercept", torch.zeros(tasks))
        self.register_buffer("weight", torch.ones(tasks))
        # Checkpoints of classification kernels fitted before Platt scaling have no such buffer and
        # blend the raw values, as they did.
        self.register_buffer("platt", torch.tensor([[1.0, 0.0]] * tasks) if probabilities else None)
        #: Set by :meth:`fix_levels` for a traced program: the kernel by dense matrix products alone.
        self.levels: Optional[int] = None
        self._cached: Optional[Tuple[Tuple[int, int, str], List[Tuple[List[torch.Tensor], torch.Tensor]]]] = None

    def fix_levels(self) -> None:
        """Compute the kernel by matrix products alone from now on (for ``torch.export`` and ONNX,
        which cannot loop over a count read from the data), up to the references' largest count."""
        self.levels = int(self.references.max()) if self.references.numel() else 0

    @classmethod
    def from_fit(cls, fit: KernelFit) -> "FingerprintKernel":
        """The module holding ``fit``."""
        references, size = fit.references.shape
        kernel = cls(references, size, fit.coefficients.shape[1], probabilities=fit.platt is not None,
                     logit_blend=fit.platt is not None, segments=fit.segments)
        for name in ("references", "coefficients", "intercept", "weight") + (("platt",) if fit.platt is not None else ()):
            getattr(kernel, name).copy_(getattr(fit, name))
        return kernel

    def predictions(self, fingerprints: torch.Tensor) -> torch.Tensor:
        """The kernel model's predictions ``[B, T]`` (target units; probabilities with Platt scaling)
        for count fingerprints ``[B, F]``."""
        return self._values(fingerprints) if self.platt is None else torch.sigmoid(self._logits(fingerprints))

    def _logits(self, fingerprints: torch.Tensor) -> torch.Tensor:
        """The Platt-scaled values' logits ``a * value + b`` ``[B, T]`` (a kernel with probabilities)."""
        assert self.platt is not None  # only kernels with probabilities have logits
        return self.platt[:, 0] * self._values(fingerprints) + self.platt[:, 1]

    def _values(self, fingerprints: torch.Tensor) -> torch.Tensor:
        """The kernel ridge regression's values ``[B, T]`` (before any Platt scaling)."""
        query = fingerprints.to(self.coefficients.dtype)
        if self.levels is not None:
            similarity = mean_minmax_kernel(query, self.references.to(query.dtype), self.segments, self.levels)
        else:
            similarity = _mean([minmax_from_levels(query[:, part], levels, sums)
                                for part, (levels, sums) in zip(self.slices, self._levels())])
        return similarity @ self.coefficients + self.intercept

    def _levels(self) -> List[Tuple[List[torch.Tensor], torch.Tensor]]:
        """Per fingerprint, the references' :func:`count_levels` and row sums, computed once for
        the references as they are."""
        key = (self.references.data_ptr(), self.references._version, str(self.references.device))
        if self._cached is None or self._cached[0] != key:
            references = self.references.to(self.coefficients.dtype)
            self._cached = (key, [(count_levels(references[:, part]), references[:, part].sum(dim=1)) for part in self.slices])
        return self._cached[1]

    def check_values(self) -> None:
        """Raise :class:`~dgl_graphtx.errors.ConfigError` unless the blend weights lie in ``[0, 1]``
        and the coefficients and intercepts are finite (what a fit gives; a checkpoint read back
        may hold anything).

        Example:
            >>> kernel = FingerprintKernel(references=2, size=4, tasks=1)
            >>> kernel.check_values()
            >>> _ = kernel.weight.fill_(2.0)
            >>> kernel.check_values()
            Traceback (most recent call last):
            ...
            dgl_graphtx.errors.ConfigError: the fingerprint kernel's network weights must lie in [0, 1], got [2.0]
        """
        if not bool(((self.weight >= 0) & (self.weight <= 1)).all()):
            raise ConfigError(f"the fingerprint kernel's network weights must lie in [0, 1], got {self.weight.tolist()}")
        if not (bool(torch.isfinite(self.coefficients).all()) and bool(torch.isfinite(self.intercept).all())):
            raise ConfigError("the fingerprint kernel's coefficients and intercepts must be finite")
        if self.platt is not None and not bool(torch.isfinite(self.platt).all()):
            raise ConfigError("the fingerprint kernel's Platt scaling must be finite")

    def alone(self) -> List[int]:
        """The tasks this kernel predicts alone (the network's blend weight 0): the network, and
        so its explanations and its spread, count for nothing there.

        Example:
            >>> kernel = FingerprintKernel(references=2, size=4, tasks=3)
            >>> _ = kernel.weight.copy_(torch.tensor([1.0, 0.0, 0.3]))
            >>> kernel.alone()
            [1]
        """
        return [task for task, weight in enumerate(self.weight.tolist()) if weight == 0.0]

    def blend(self, network: torch.Tensor, fingerprints: torch.Tensor) -> torch.Tensor:
        """``w * network + (1 - w) * kernel`` per task ``[B, T]``: in target units, or with
        ``logit_blend`` in logits (``network`` the network's logits, ``kernel`` the Platt-scaled
        values' logits ``a * value + b``; logits out).

        Example:
            >>> kernel = FingerprintKernel(references=1, size=4, tasks=1, probabilities=True, logit_blend=True)
            >>> _ = kernel.weight.fill_(0.5)
            >>> kernel.blend(torch.tensor([[2.0]]), torch.ones(1, 4))  # the kernel's logit is b = 0
            tensor([[1.]])
        """
        kernel = self._logits(fingerprints) if self.logit_blend else self.predictions(fingerprints)
        return self.weight * network + (1 - self.weight) * kernel.to(network.dtype)


def describe_fit(fit: KernelFit, task_names: Optional[Sequence[str]] = None) -> str:
    """One line per task: the ridge, the network's weight and the validation errors (RMSE; log-loss
    for classification).

    Example:
        >>> fit = KernelFit(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), torch.tensor([0.25]), [0.1],
        ...                 [1.0], [0.5], [0.45])
        >>> print(describe_fit(fit, ["pKi"]))
        fingerprint kernel, pKi: network weight 0.25, ridge 0.1; validation RMSE network 1.000, kernel 0.707, blend 0.671
    """
    names = _task_names(fit, task_names)
    counts = fit.validation_counts or [0] * len(names)
    lines = []
    flat = [fit.platt is not None and float(fit.platt[task, 0]) == 0.0 for task in range(len(names))]
    for name, w, alpha, net, kern, blend, count, no_signal in zip(names, fit.weight.tolist(), fit.alphas, fit.validation_network,
                                                                  fit.validation_kernel, fit.validation_blend, counts, flat):
        if alpha != alpha:  # NaN: not fitted
            why = "fewer than 3 labelled molecules" if count else "no labelled validation molecules"
            lines.append(f"fingerprint kernel, {name}: not used ({why})")
            continue
        measure, shown = ("log-loss", (net, kern, blend)) if fit.log_loss else ("RMSE", (net ** 0.5, kern ** 0.5, blend ** 0.5))
        if no_signal:
            lines.append(f"fingerprint kernel, {name}: not used (its leave-one-out scores do not rise with the labels); "
                         f"validation {measure} network {shown[0]:.3f}")
            continue
        lines.append(f"fingerprint kernel, {name}: network weight {w:.2f}, ridge {alpha:g}; validation {measure} "
                     f"network {shown[0]:.3f}, kernel {shown[1]:.3f}, blend {shown[2]:.3f}")
    return "\n".join(lines)


def few_validation_warning(fit: KernelFit, task_names: Optional[Sequence[str]] = None) -> Optional[str]:
    """One line naming the tasks whose network weight was chosen on fewer than
    :data:`FEW_VALIDATION` labelled validation molecules (on so few, a weight between the two fits
    them almost exactly, whatever it is worth), or ``None``.

    Example:
        >>> fit = KernelFit(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(2), torch.tensor([0.25, 1.0]), [0.1, 0.1],
        ...                 [1.0, 1.0], [0.5, 0.5], [0.01, 1.0], [1, 40])
        >>> few_validation_warning(fit, ["pKi", "logD"])  # doctest: +ELLIPSIS
        'fingerprint kernel: network weight chosen on fewer than 5 labelled validation molecules for pKi (1, weight 0.25), too few ...'
    """
    few = [(name, w, count) for name, w, alpha, count in zip(_task_names(fit, task_names), fit.weight.tolist(), fit.alphas,
                                                              fit.validation_counts) if alpha == alpha and count < FEW_VALIDATION]
    if not few:
        return None
    shown = ", ".join(f"{name} ({count}, weight {w:.2f})" for name, w, count in few[:3]) + (
        f" and {len(few) - 3} more target(s)" if len(few) > 3 else "")
    return (f"fingerprint kernel: network weight chosen on fewer than {FEW_VALIDATION} labelled validation molecules for "
            f"{shown}, too few to tell a good blend from chance; give the validation part more "
            "(--set data.fractions=0.7,0.2,0.1, --split-col, or --valid with --test)")


def _task_names(fit: KernelFit, task_names: Optional[Sequence[str]]) -> List[str]:
    return list(task_names) if task_names is not None else [f"task {i}" for i in range(len(fit.alphas))]
