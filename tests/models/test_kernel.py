"""The fingerprint kernel (dgl_graphtx.models.kernel) against independent references: RDKit's
Tanimoto similarity of count fingerprints, scikit-learn's kernel ridge regression, choices made by
a plain loop over the grids; and inside a model: the blend, the classification path, checkpoints."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from rdkit import Chem, DataStructs
from rdkit.Chem import rdFingerprintGenerator
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression

from dgl_graphtx.checkpoint import CheckpointMeta, load_checkpoint, save_checkpoint
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.datasets import ExtraFeatures, MoleculeDataset, add_extra_features, collate_molecules, freesolv
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.featurize.descriptors import kernel_fingerprints, kernel_segments
from dgl_graphtx.models import ModelConfig, build_model
from dgl_graphtx.models.kernel import (ALPHAS, FEW_VALIDATION, WEIGHTS, FingerprintKernel, describe_fit, few_validation_warning,
                                       fit_fingerprint_kernel, fit_platt, mean_minmax_kernel, minmax_kernel)
from dgl_graphtx.relation_graph import RelationConfig

SMILES = list(freesolv()["smiles"][:80])
SPEC = "morgan_counts:radius=2:size=2048"


def test_minmax_kernel_is_rdkits_tanimoto_on_count_fingerprints():
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
    sparse = [generator.GetCountFingerprint(Chem.MolFromSmiles(s)) for s in SMILES[:30]]
    expected = np.array([DataStructs.BulkTanimotoSimilarity(a, sparse) for a in sparse])
    counts = torch.from_numpy(kernel_fingerprints(SPEC, SMILES[:30])).double()
    assert np.abs(minmax_kernel(counts, counts).numpy() - expected).max() < 1e-12  # sparse products level by level
    top = int(counts.max())
    assert np.abs(minmax_kernel(counts, counts, levels=top).numpy() - expected).max() < 1e-12  # dense, as exported
    assert torch.equal(minmax_kernel(torch.zeros(1, 4), torch.zeros(2, 4)), torch.zeros(1, 2))  # empty vs empty: 0, as RDKit


MULTI = "morgan_counts:radius=2:size=2048+atom_pair_counts:size=2048"


def test_a_kernel_of_several_fingerprints_is_the_mean_of_rdkits_tanimoto_on_each():
    mols = [Chem.MolFromSmiles(s) for s in SMILES[:30]]
    expected = 0
    for generator in (rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048),
                      rdFingerprintGenerator.GetAtomPairGenerator(fpSize=2048)):
        sparse = [generator.GetCountFingerprint(m) for m in mols]
        expected = expected + np.array([DataStructs.BulkTanimotoSimilarity(a, sparse) for a in sparse]) / 2
    counts = torch.from_numpy(kernel_fingerprints(MULTI, SMILES[:30])).double()
    assert np.abs(mean_minmax_kernel(counts, counts, kernel_segments(MULTI)).numpy() - expected).max() < 1e-12
    kernel = FingerprintKernel(references=30, size=4096, tasks=1, segments=kernel_segments(MULTI))
    kernel.references.copy_(counts.to(torch.uint8))
    kernel.coefficients.copy_(torch.linspace(-1, 1, 30)[:, None])
    wanted = torch.from_numpy(expected[:5]).float() @ kernel.coefficients
    assert torch.allclose(kernel.predictions(counts[:5].float()), wanted, atol=1e-6)
    kernel.fix_levels()  # dense products, as exported
    assert torch.allclose(kernel.predictions(counts[:5].float()), wanted, atol=1e-6)
    with pytest.raises(ConfigError, match="segments \\(2048, 2048\\) must add up to its 2048 bins"):
        FingerprintKernel(references=1, size=2048, tasks=1, segments=(2048, 2048))


def test_a_fit_on_several_fingerprints_is_the_fit_on_their_mean_kernel_and_checkpoints_keep_it(tmp_path):
    ds = _dataset()
    fps, labels = torch.from_numpy(kernel_fingerprints(MULTI, SMILES[:40])), ds.raw_labels
    network = labels[30:] + 1.0
    fit = fit_fingerprint_kernel(fps[:30], labels[:30], fps[30:], labels[30:], network, segments=kernel_segments(MULTI))
    gram = mean_minmax_kernel(fps.double(), fps.double(), kernel_segments(MULTI)).numpy()
    y, every = labels[:, 0].numpy(), np.arange(40)

    def sk(rows, alpha, query):  # sklearn's ridge on the mean kernel, centred labels
        model = KernelRidge(alpha=alpha, kernel="precomputed").fit(gram[np.ix_(rows, rows)], y[rows] - y.mean())
        return model.predict(gram[np.ix_(query, rows)]) + y.mean()

    errors = {a: np.mean([(sk(np.delete(every, i), a, [i])[0] - y[i]) ** 2 for i in every]) for a in ALPHAS}
    assert fit.alphas == [min(errors, key=errors.get)] and fit.segments == (2048, 2048)
    model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2)).eval()
    model.attach_kernel(FingerprintKernel.from_fit(fit))
    assert model.config.kernel_segments == (2048, 2048) and model.config.kernel_size == 4096
    kernel_values = model.kernel.predictions(fps[:3].float()).double().numpy()[:, 0]
    assert np.abs(kernel_values - sk(every, fit.alphas[0], [0, 1, 2])).max() < 1e-3
    save_checkpoint(tmp_path / "m.pt", model, CheckpointMeta(FeaturizerConfig(), RelationConfig(), ["expt"]))
    loaded = load_checkpoint(tmp_path / "m.pt").model.eval()
    assert loaded.kernel.segments == (2048, 2048)
    assert torch.equal(loaded.kernel.predictions(fps[:3].float()), model.kernel.predictions(fps[:3].float()))
    with pytest.raises(ConfigError, match="kernel_segments \\(2048, 1\\) must add up to kernel_size=4096"):
        dataclasses.replace(model.config, kernel_segments=(2048, 1))


def test_a_kernel_compares_with_its_references_as_they_are_now():
    kernel = FingerprintKernel(references=2, size=3, tasks=1)
    kernel.coefficients.fill_(1.0)
    query = torch.tensor([[1.0, 1, 0]])
    assert kernel.predictions(query).item() == 0.0  # empty references
    kernel.references.copy_(torch.tensor([[1, 1, 0], [2, 0, 0]], dtype=torch.uint8))  # e.g. loaded from a checkpoint
    assert kernel.predictions(query).item() == pytest.approx(1.0 + 1 / 3)  # min sums 2 and 1, max sums 2 and 3


def _labels(n, seed=0):
    rng = np.random.default_rng(seed)
    counts = kernel_fingerprints(SPEC, SMILES[:n]).astype(float)
    return counts, counts[:, :64].sum(axis=1) * 0.1 + rng.normal(0, 0.1, n)


def test_fit_chooses_ridge_by_leave_one_out_and_weight_on_validation_like_sklearn():
    x, y = _labels(50)
    train, valid, every = np.arange(40), np.arange(40, 50), np.arange(50)
    network = y[valid] + np.random.default_rng(1).normal(0, 0.3, 10)  # a noisy network
    fit = fit_fingerprint_kernel(torch.from_numpy(x[train]), torch.from_numpy(y[train, None]), torch.from_numpy(x[valid]),
                                 torch.from_numpy(y[valid, None]), torch.from_numpy(network[:, None]))
    gram = minmax_kernel(torch.from_numpy(x), torch.from_numpy(x)).numpy()
    mean = y.mean()  # the intercept: the labels' mean, kept when one is left out

    def sk(rows, alpha, query):  # the reference: sklearn's ridge on the centred labels
        model = KernelRidge(alpha=alpha, kernel="precomputed").fit(gram[np.ix_(rows, rows)], y[rows] - mean)
        return model.predict(gram[np.ix_(query, rows)]) + mean

    left_out = {a: np.array([sk(np.delete(every, i), a, [i])[0] for i in every]) for a in ALPHAS}  # refitted 50 times
    errors = {a: np.mean((left_out[a] - y) ** 2) for a in ALPHAS}
    alpha = min(errors, key=errors.get)
    blends = {w: np.mean((w * network + (1 - w) * left_out[alpha][valid] - y[valid]) ** 2) for w in WEIGHTS}
    weight = min(blends, key=blends.get)
    assert fit.alphas == [alpha] and fit.weight.item() == pytest.approx(weight)
    assert fit.validation_kernel[0] == pytest.approx(np.mean((left_out[alpha][valid] - y[valid]) ** 2))
    assert fit.validation_blend[0] == pytest.approx(blends[weight])
    kernel = FingerprintKernel.from_fit(fit)
    got = kernel.predictions(torch.from_numpy(x[:3])).double().numpy()[:, 0]
    assert np.abs(got - sk(every, alpha, [0, 1, 2])).max() < 1e-3  # fitted on every molecule; float32 buffers
    query = kernel_fingerprints(SPEC, ["CCO", "c1ccccc1Cl"]).astype(float)
    assert kernel.predictions(torch.from_numpy(query)).shape == (2, 1)


def test_rows_of_one_fingerprint_are_left_out_together_like_sklearn_refitted_without_them():
    """The same molecule measured again (or stereoisomers, which share Morgan counts): left in, a
    copy predicts its twins from their own labels, which no new molecule has."""
    x, y = _labels(30)
    copies = np.array([0, 0, 1, 5, 5, 5, 7])  # the same molecules measured again, with other labels
    x = np.concatenate([x, x[copies]])
    y = np.concatenate([y, y[copies] + np.random.default_rng(2).normal(0, 0.3, len(copies))])
    order = np.random.default_rng(3).permutation(len(y))  # copies in training and validation
    x, y = x[order], y[order]
    train, valid, every = np.arange(29), np.arange(29, 37), np.arange(37)
    network = y[valid] + np.random.default_rng(1).normal(0, 0.3, 8)
    fit = fit_fingerprint_kernel(torch.from_numpy(x[train]), torch.from_numpy(y[train, None]), torch.from_numpy(x[valid]),
                                 torch.from_numpy(y[valid, None]), torch.from_numpy(network[:, None]))
    gram = minmax_kernel(torch.from_numpy(x), torch.from_numpy(x)).numpy()
    mean = y.mean()

    def left_out(alpha):  # every row predicted by sklearn refitted without the rows of its fingerprint
        out = []
        for i in every:
            rows = np.flatnonzero((x != x[i]).any(axis=1))
            model = KernelRidge(alpha=alpha, kernel="precomputed").fit(gram[np.ix_(rows, rows)], y[rows] - mean)
            out.append(model.predict(gram[np.ix_([i], rows)])[0] + mean)
        return np.array(out)

    predicted = {a: left_out(a) for a in ALPHAS}
    errors = {a: np.mean((predicted[a] - y) ** 2) for a in ALPHAS}
    alpha = min(errors, key=errors.get)
    assert fit.alphas == [alpha]
    assert fit.validation_kernel[0] == pytest.approx(np.mean((predicted[alpha][valid] - y[valid]) ** 2), rel=1e-6)
    blends = {w: np.mean((w * network + (1 - w) * predicted[alpha][valid] - y[valid]) ** 2) for w in WEIGHTS}
    assert fit.weight.item() == pytest.approx(min(blends, key=blends.get))


def _sklearn_platt(scores, labels):
    """Platt's fit by scikit-learn: each molecule twice, as a positive weighted by its smoothed
    target and as a negative weighted by the rest, with (almost) no regularisation."""
    positives = labels.sum()
    targets = np.where(labels > 0.5, (positives + 1) / (positives + 2), 1 / (len(labels) - positives + 2))
    model = LogisticRegression(C=1e12, tol=1e-14, max_iter=100_000).fit(
        np.concatenate([scores, scores])[:, None], np.r_[np.ones(len(scores)), np.zeros(len(scores))],
        sample_weight=np.r_[targets, 1 - targets])
    return model.coef_[0, 0], model.intercept_[0]


def test_platt_scaling_is_the_weighted_logistic_fit_and_stays_finite_on_separable_scores():
    rng = np.random.default_rng(0)
    labels = (rng.random(60) < 0.3).astype(float)
    scores = labels * 0.6 + rng.normal(0, 0.4, 60)  # overlapping classes
    assert np.allclose(fit_platt(torch.from_numpy(scores), torch.from_numpy(labels)), _sklearn_platt(scores, labels), atol=1e-5)
    separable = np.r_[rng.uniform(-1, 0, 10), rng.uniform(1, 2, 5)]
    a, b = fit_platt(torch.from_numpy(separable), torch.from_numpy(np.r_[np.zeros(10), np.ones(5)]))
    assert np.isfinite([a, b]).all() and a > 0
    assert np.allclose((a, b), _sklearn_platt(separable, np.r_[np.zeros(10), np.ones(5)]), atol=1e-4)


def test_platt_scaling_never_reverses_the_scores():
    """Leave-one-out scores of a kernel with little signal are anti-correlated with their labels
    (leaving a positive out lowers what the others predict for it); an unconstrained fit turns them
    upside down (slope < 0), and a blend weight chosen on them then trusts a kernel that ranks new
    molecules in reverse. The fit is the best non-decreasing scaling: the loss being convex, with
    the slope at 0, the constant whose probability is the smoothed targets' mean."""
    rng = np.random.default_rng(1)
    labels = (rng.random(40) < 0.3).astype(float)
    scores = -0.5 * labels + rng.normal(0, 0.3, 40)  # anti-correlated
    assert _sklearn_platt(scores, labels)[0] < 0
    a, b = fit_platt(torch.from_numpy(scores), torch.from_numpy(labels))
    positives = labels.sum()
    targets = np.where(labels > 0.5, (positives + 1) / (positives + 2), 1 / (len(labels) - positives + 2))
    assert a == 0.0 and b == pytest.approx(np.log(targets.mean() / (1 - targets.mean())), abs=1e-9)


def test_a_kernel_that_cannot_tell_the_classes_apart_does_not_rank_a_known_negative_first():
    """39 positives and one negative: the kernel's leave-one-out scores are lowest for the
    positives most like the negative, and a reversed scaling gave the negative itself 0.9999, the
    highest probability of all 40."""
    fps = torch.from_numpy(kernel_fingerprints(SPEC, SMILES[:40]))
    labels = torch.ones(40, 1, dtype=torch.float64)
    labels[35] = 0
    network = torch.linspace(0.6, 0.9, 10)[:, None]
    fit = fit_fingerprint_kernel(fps[:30], labels[:30], fps[30:], labels[30:], network, probabilities=True)
    assert fit.platt[0, 0].item() == 0.0  # the unconstrained slope is negative here
    got = FingerprintKernel.from_fit(fit).predictions(fps)[:, 0]
    assert got[35] <= got[torch.arange(40) != 35].min()
    # a flat kernel would only flatten the network's ranking (all tied at weight 0): it is not used
    assert fit.weight.item() == 1.0 and fit.validation_blend[0] == pytest.approx(fit.validation_network[0])
    assert describe_fit(fit, ["active"]) == ("fingerprint kernel, active: not used (its leave-one-out scores do not rise "
                                             f"with the labels); validation log-loss network {fit.validation_network[0]:.3f}")


def test_a_classification_kernel_gives_probabilities_platt_scaled_from_its_left_out_values():
    """KRR on 0/1 labels strays outside [0, 1] (blends of it were clamped, tying molecules at the
    bounds); with ``probabilities`` its values are sigmoid(a * value + b), (a, b) Platt's fit on the
    leave-one-out values, and the blend weight is the one of the least validation log-loss of the
    blend in logits, sigmoid(w * logit(network) + (1 - w) * (a * value + b))."""
    x = kernel_fingerprints(SPEC, SMILES[:60]).astype(float)
    y = freesolv()["expt"][:60].to_numpy()  # a property the kernel learns: its left-out values rise with the labels
    labels = (y > np.median(y)).astype(float)
    train, valid, every = np.arange(45), np.arange(45, 60), np.arange(60)
    network = np.clip(labels[valid] * 0.6 + 0.2 + np.random.default_rng(2).normal(0, 0.2, 15), 0.01, 0.99)
    fit = fit_fingerprint_kernel(torch.from_numpy(x[train]), torch.from_numpy(labels[train, None]), torch.from_numpy(x[valid]),
                                 torch.from_numpy(labels[valid, None]), torch.from_numpy(network[:, None]), probabilities=True)
    gram = minmax_kernel(torch.from_numpy(x), torch.from_numpy(x)).numpy()
    mean, alpha = labels.mean(), fit.alphas[0]

    def sk(rows, query):
        return KernelRidge(alpha=alpha, kernel="precomputed").fit(gram[np.ix_(rows, rows)], labels[rows] - mean).predict(
            gram[np.ix_(query, rows)]) + mean

    left_out = np.array([sk(np.delete(every, i), [i])[0] for i in every])
    a, b = _sklearn_platt(left_out, labels)
    assert a > 0 and np.allclose(fit.platt.numpy(), [[a, b]], atol=1e-4)
    def log_loss(logits):
        p = 1 / (1 + np.exp(-logits))
        return -np.mean(labels[valid] * np.log(p) + (1 - labels[valid]) * np.log(1 - p))

    net_logits = np.log(network / (1 - network))
    blends = {w: log_loss(w * net_logits + (1 - w) * (a * left_out[valid] + b)) for w in WEIGHTS}
    weight = min(blends, key=blends.get)
    assert fit.weight.item() == pytest.approx(weight) and 0 < weight < 1  # a blend of the two, not one alone
    assert fit.validation_blend[0] == pytest.approx(blends[weight], rel=1e-4)
    assert fit.validation_network[0] == pytest.approx(log_loss(net_logits), rel=1e-6)
    kernel = FingerprintKernel.from_fit(fit)
    got = kernel.predictions(torch.from_numpy(x)).double().numpy()[:, 0]
    raw = sk(every, every)
    assert np.abs(got - 1 / (1 + np.exp(-(a * raw + b)))).max() < 1e-4 and 0 < got.min() and got.max() < 1
    assert fit_fingerprint_kernel(torch.from_numpy(x[train]), torch.from_numpy(labels[train, None]), torch.from_numpy(x[valid]),
                                  torch.from_numpy(labels[valid, None]), torch.from_numpy(network[:, None])).platt is None


def test_tasks_are_fitted_on_their_own_labelled_rows():
    x, y = _labels(80)
    labels = np.stack([y, 2 * y], axis=1)
    labels[::3, 1] = np.nan  # task 1 misses a third of its labels
    fps = torch.from_numpy(x)
    fit = fit_fingerprint_kernel(fps[:60], torch.from_numpy(labels[:60]), fps[60:], torch.from_numpy(labels[60:]),
                                 torch.from_numpy(labels[60:]).nan_to_num(0.0))
    missing = np.isnan(labels[:, 1])
    assert (fit.coefficients[torch.from_numpy(missing), 1] == 0).all() and (fit.coefficients[:, 0] != 0).all()
    gram = minmax_kernel(fps, fps).numpy()
    rows = np.flatnonzero(~missing)
    mean = labels[rows, 1].mean()
    model = KernelRidge(alpha=fit.alphas[1], kernel="precomputed").fit(gram[np.ix_(rows, rows)], labels[rows, 1] - mean)
    expected = model.predict(gram[:5][:, rows]) + mean
    got = FingerprintKernel.from_fit(fit).predictions(fps[:5]).double().numpy()[:, 1]
    assert np.abs(got - expected).max() < 1e-3


def test_without_validation_labels_the_kernel_is_not_used_and_large_sets_are_drawn():
    x, y = _labels(40)
    fps, labels = torch.from_numpy(x), torch.from_numpy(y[:, None])
    fit = fit_fingerprint_kernel(fps[:30], labels[:30], fps[30:], torch.full((10, 1), float("nan")), labels[30:])
    assert fit.weight.tolist() == [1.0] and np.isnan(fit.alphas[0]) and (fit.coefficients == 0).all()
    drawn = fit_fingerprint_kernel(fps[:30], labels[:30], fps[30:], labels[30:], labels[30:], max_references=25, seed=3)
    assert drawn.references.shape == (25, 2048) and drawn.references.dtype == torch.uint8


def test_a_weight_chosen_on_few_validation_molecules_is_said_and_an_unfitted_task_says_why():
    x, y = _labels(40)
    fps, labels = torch.from_numpy(x), torch.from_numpy(np.stack([y, y], axis=1))
    labels[:38, 1] = np.nan  # task 1: two labelled molecules in all, both in validation
    valid = labels[30:].clone()
    valid[1:, 0] = np.nan  # task 0: one labelled validation molecule
    network = valid[:, :1].nan_to_num(0.0).repeat(1, 2) + 1.0
    fit = fit_fingerprint_kernel(fps[:30], labels[:30], fps[30:], valid, network)
    assert fit.validation_counts == [1, 2]
    assert few_validation_warning(fit, ["a", "b"]) == (
        f"fingerprint kernel: network weight chosen on fewer than {FEW_VALIDATION} labelled validation molecules for a "
        f"(1, weight {fit.weight[0]:.2f}), too few to tell a good blend from chance; give the validation part more "
        "(--set data.fractions=0.7,0.2,0.1, --split-col, or --valid with --test)")  # b was not fitted: nothing chosen
    assert describe_fit(fit, ["a", "b"]).splitlines()[1] == "fingerprint kernel, b: not used (fewer than 3 labelled molecules)"
    enough = fit_fingerprint_kernel(fps[:30], labels[:30, :1], fps[30:], labels[30:, :1], labels[30:, :1] + 1.0)
    assert enough.validation_counts == [10] and few_validation_warning(enough) is None


def _dataset(task="regression"):
    targets = [[float(v > 0)] for v in freesolv()["expt"][:40]] if task == "classification" else freesolv()[["expt"]].values[:40]
    ds = MoleculeDataset(SMILES[:40], targets, featurizer=FeaturizerConfig(), relation=RelationConfig(), progress=False)
    add_extra_features(ds, ExtraFeatures(kernel=SPEC), SMILES[:40])
    return ds


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_a_model_blends_its_outputs_with_the_kernel_in_target_units(task):
    ds = _dataset(task)
    torch.manual_seed(0)
    model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2, task=task)).eval()
    batch = collate_molecules([ds[i] for i in range(10)])
    plain = model.predict(batch.graph, batch.relation_graph)
    fps = torch.from_numpy(kernel_fingerprints(SPEC, SMILES[:40]))
    labels = ds.raw_labels
    fit = fit_fingerprint_kernel(fps[:30], labels[:30], fps[30:], labels[30:], torch.full((10, 1), 0.5),
                                 weights=(0.25,), probabilities=task == "classification")  # one weight: the blend is known
    model.attach_kernel(FingerprintKernel.from_fit(fit))
    assert model.config.kernel_references == 40
    assert model.config.kernel_probabilities == (task == "classification")
    kernel = FingerprintKernel.from_fit(fit).predictions(fps[:10])
    expected = 0.25 * plain + 0.75 * kernel
    if task == "classification":  # log-linear pooling: the blend of the two logits
        assert model.config.kernel_logit_blend
        expected = torch.sigmoid(0.25 * torch.logit(plain.double()) + 0.75 * torch.logit(kernel.double())).float()
    assert torch.allclose(model.predict(batch.graph, batch.relation_graph), expected, atol=1e-5)


def test_checkpoints_keep_the_kernel_and_older_configs_load_without_one(tmp_path):
    ds = _dataset()
    model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2)).eval()
    fps, labels = torch.from_numpy(kernel_fingerprints(SPEC, SMILES[:40])), ds.raw_labels
    model.attach_kernel(FingerprintKernel.from_fit(fit_fingerprint_kernel(fps[:30], labels[:30], fps[30:], labels[30:],
                                                                          labels[30:] + 1.0)))
    meta = CheckpointMeta(FeaturizerConfig(), RelationConfig(), ["expt"])
    save_checkpoint(tmp_path / "m.pt", model, meta)
    loaded = load_checkpoint(tmp_path / "m.pt").model.eval()
    batch = collate_molecules([ds[i] for i in range(8)])
    assert torch.equal(loaded.predict(batch.graph, batch.relation_graph), model.predict(batch.graph, batch.relation_graph))
    old = {k: v for k, v in dataclasses.asdict(model.config).items() if not k.startswith("kernel_")}
    assert ModelConfig.from_dict(old).kernel_references == 0
    one = {k: v for k, v in dataclasses.asdict(model.config).items() if k != "kernel_segments"}  # before several fingerprints
    assert ModelConfig.from_dict(one) == model.config and model.kernel.segments == ()


@pytest.mark.parametrize("version", [3, 4])
def test_a_classification_checkpoint_of_an_earlier_version_blends_as_it_did(tmp_path, version):
    """Version 3: a kernel saved without Platt scaling (no ``platt`` buffer, ``kernel_probabilities``
    absent from its config) blends its raw values; version 4: a Platt-scaled kernel saved before the
    blend in logits (``kernel_logit_blend`` absent) blends the probabilities; both clamped, as they were."""
    ds = _dataset("classification")
    torch.manual_seed(0)
    model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2, task="classification")).eval()
    batch = collate_molecules([ds[i] for i in range(10)])
    plain = model.predict(batch.graph, batch.relation_graph)
    fps, labels = torch.from_numpy(kernel_fingerprints(SPEC, SMILES[:40])), ds.raw_labels
    fit = fit_fingerprint_kernel(fps[:30], labels[:30], fps[30:], labels[30:], torch.full((10, 1), 0.5), weights=(0.25,),
                                 probabilities=version == 4)
    kernel = FingerprintKernel.from_fit(fit)
    kernel.logit_blend = False  # as the module of a checkpoint from before
    model.attach_kernel(kernel)
    saved = {k: v for k, v in dataclasses.asdict(model.config).items()
             if k not in ("kernel_logit_blend",) + (("kernel_probabilities",) if version == 3 else ())}
    assert ModelConfig.from_dict(saved) == model.config  # the fields absent from an old config read as they were
    assert (version == 3) == (model.kernel.platt is None) == ("kernel.platt" not in model.state_dict())
    save_checkpoint(tmp_path / "old.pt", model, CheckpointMeta(FeaturizerConfig(), RelationConfig(), ["active"]))
    loaded = load_checkpoint(tmp_path / "old.pt").model.eval()
    assert loaded.config.kernel_probabilities == (version == 4) and not loaded.kernel.logit_blend
    raw = minmax_kernel(fps[:10].float(), fit.references.float()) @ fit.coefficients + fit.intercept
    values = raw if version == 3 else kernel.predictions(fps[:10])
    expected = (0.25 * plain + 0.75 * values).clamp(1e-6, 1 - 1e-6)
    assert torch.allclose(loaded.predict(batch.graph, batch.relation_graph), expected, atol=1e-5)


def test_a_kernel_blends_in_logits_only_with_probabilities():
    with pytest.raises(ConfigError, match="blends in logits only with probabilities"):
        FingerprintKernel(references=2, size=4, tasks=1, logit_blend=True)


def test_a_model_with_a_kernel_needs_the_fingerprints():
    ds = MoleculeDataset(SMILES[:4], [[1.0]] * 4, progress=False)
    model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2, kernel_references=3)).eval()
    batch = collate_molecules([ds[i] for i in range(4)])
    with pytest.raises(Exception, match="kernel_fp"):
        model.predict(batch.graph, batch.relation_graph)
