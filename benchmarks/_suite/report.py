"""The suite's report from the stored results: per half, mean ± std per set and tool, wins and
losses per pair of tools, mean ranks, a paired Wilcoxon test over sets x seeds for the key pairs,
and CPU time per run; printed and written into docs/benchmarks.md (section ``suite``)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np
import pandas as pd
from scipy.stats import wilcoxon

from .config import (ENSEMBLE_SIZE, FINE_TUNED, HALVES, KEY_PAIRS, RECOMMENDED, SEEDS, SETS_BY_NAME, TOOL_ORDER, TOOLS,
                     TOOLS_BY_NAME, ToolSpec)
from .metrics import relative_improvement

def is_current(result: Dict[str, object]) -> bool:
    """Whether a stored run belongs to the suite as configured now: its tool still exists and was run
    with the tool's present settings (a run of a tool whose settings changed, e.g. another backbone,
    is stale until it is redone).

    Example:
        >>> is_current({"tool": "default", "settings": {"args": []}}), is_current({"tool": "default", "settings": {"args": ["x"]}})
        (True, False)
    """
    tool = TOOLS_BY_NAME.get(str(result["tool"]))
    return tool is not None and ("settings" not in result or result["settings"] == tool.settings)


def load_results(folder: Path) -> pd.DataFrame:
    """One row per stored run of the suite as configured now (:func:`is_current`): set, half, seed,
    tool, metric, value, cpu_s, wall_s, epochs."""
    rows = [json.loads(path.read_text()) for path in sorted((folder / "runs").glob("*/seed*/*.json"))]
    current = [r for r in rows if is_current(r)]
    if len(current) < len(rows):
        print(f"{len(rows) - len(current)} stored run(s) of changed or retired tools left out of the report", file=sys.stderr)
    columns = ["set", "half", "seed", "tool", "metric", "value", "cpu_s", "wall_s", "epochs"]
    return pd.DataFrame([{k: r[k] for k in columns} for r in current], columns=columns)


def relative_errors(frame: pd.DataFrame, reference: str = "default") -> pd.DataFrame:
    """Each of our recipes against ``reference`` on the same (set, seed): the mean over those pairs of
    error / reference's error (error = RMSE, MAE or 1 - ROC-AUC; below 1: better), the pairs and the
    pairs it is better in. The rule recipes are chosen by on the development half.

    Example:
        >>> rows = [{"set": "s", "seed": k, "tool": t, "metric": "rmse", "value": v}
        ...         for k, (d, r) in enumerate([(1.0, 0.8), (2.0, 2.2)]) for t, v in (("default", d), ("descriptors", r))]
        >>> relative_errors(pd.DataFrame(rows)).round(3).to_dict("records")
        [{'tool': 'descriptors', 'relative error': 0.95, 'pairs': 2, 'better': 1}]
    """
    pivot = frame.pivot_table(index=["set", "seed"], columns="tool", values="value")
    metric = frame.groupby("set")["metric"].first()
    ours = [t for t in pivot.columns if t != reference and t in TOOLS_BY_NAME and TOOLS_BY_NAME[t].kind == "ours"]
    rows = []
    for tool in ours if reference in pivot else []:
        both = pivot[[tool, reference]].dropna()
        if both.empty:
            continue
        ratios = [1 - relative_improvement(metric[s], row[tool], row[reference]) for (s, _), row in both.iterrows()]
        rows.append({"tool": tool, "relative error": float(np.mean(ratios)), "pairs": len(ratios), "better": int(sum(r < 1 for r in ratios))})
    return pd.DataFrame(rows, columns=["tool", "relative error", "pairs", "better"])


def mean_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean of each (set, tool) over seeds, sets as rows and tools as columns."""
    return frame.pivot_table(index="set", columns="tool", values="value", aggfunc="mean")


def _lower_is_better(frame: pd.DataFrame) -> Dict[str, bool]:
    return {s: m != "rocauc" for s, m in frame.groupby("set")["metric"].first().items()}


def ranks(means: pd.DataFrame, lower: Dict[str, bool]) -> pd.DataFrame:
    """Rank of each tool on each set (1 = best; ties share the average rank) among the tools that ran it.

    Example:
        >>> means = pd.DataFrame({"a": [1.0, 0.9], "b": [2.0, 0.8], "c": [2.0, 0.7]}, index=["x", "y"])
        >>> ranks(means, {"x": True, "y": False}).values.tolist()
        [[1.0, 2.5, 2.5], [1.0, 2.0, 3.0]]
    """
    return pd.DataFrame({s: means.loc[s].rank(ascending=lower[s]) for s in means.index}).T


def wins_losses(means: pd.DataFrame, lower: Dict[str, bool], a: str, b: str) -> Tuple[int, int, int]:
    """Sets where ``a``'s mean beats, loses to, and ties ``b``'s (sets both ran).

    Example:
        >>> means = pd.DataFrame({"a": [1.0, 0.9, 0.5], "b": [2.0, 0.8, 0.5]}, index=["x", "y", "z"])
        >>> wins_losses(means, {"x": True, "y": False, "z": True}, "a", "b")
        (2, 0, 1)
    """
    both = means[[a, b]].dropna()
    sign = np.array([1 if lower[s] else -1 for s in both.index])
    diff = (both[b] - both[a]).to_numpy() * sign
    return int((diff > 0).sum()), int((diff < 0).sum()), int((diff == 0).sum())


def paired_test(frame: pd.DataFrame, a: str, b: str) -> Dict[str, float]:
    """Wilcoxon signed-rank test (two-sided) of ``a`` against ``b`` over the (set, seed) pairs both
    ran, on their relative improvements; with the pair count, ``a``'s wins and the median."""
    pivot = frame.pivot_table(index=["set", "seed"], columns="tool", values="value")
    if a not in pivot or b not in pivot:
        return {"n": 0, "wins": 0, "median": float("nan"), "p": float("nan")}
    both = pivot[[a, b]].dropna()
    metric = frame.groupby("set")["metric"].first()
    diffs = np.array([relative_improvement(metric[s], row[a], row[b]) for (s, _), row in both.iterrows()])
    p = float(wilcoxon(diffs).pvalue) if len(diffs) and np.any(diffs != 0) else float("nan")
    return {"n": len(diffs), "wins": int((diffs > 0).sum()), "median": float(np.median(diffs)) if len(diffs) else float("nan"), "p": p}


def _cell(values: pd.Series) -> str:
    if values.empty:
        return "-"
    spread = f" ± {values.std():.3f}" if len(values) > 1 else ""
    return f"{values.mean():.3f}{spread}"


def half_markdown(frame: pd.DataFrame) -> List[str]:
    """The tables of one half."""
    tools = [t for t in TOOL_ORDER if t in set(frame.tool)]
    sets = [s for s in SETS_BY_NAME if s in set(frame.set)]
    means, lower = mean_table(frame), _lower_is_better(frame)
    lines = ["| set (metric, seeds) | " + " | ".join(tools) + " |", "|---|" + "---|" * len(tools)]
    for s in sets:
        best = means.loc[s].min() if lower[s] else means.loc[s].max()
        cells = []
        for tool in tools:
            values = frame[(frame.set == s) & (frame.tool == tool)]["value"]
            cell = _cell(values)
            cells.append(f"**{cell}**" if not values.empty and np.isclose(values.mean(), best) else cell)
        seeds = frame[frame.set == s]["seed"].nunique()
        lines.append(f"| {s} ({frame[frame.set == s]['metric'].iloc[0]}, {seeds}) | " + " | ".join(cells) + " |")
    rank = ranks(means, lower)
    lines += ["", "Mean rank over sets (1 = best; among the tools that ran each set) and CPU time per run "
              "(user + system of the tool's processes, one thread):", "",
              "| tool | mean rank | sets | CPU-s per run (mean) | CPU-h, all runs |", "|---|---|---|---|---|"]
    for tool in tools:
        runs = frame[frame.tool == tool]
        lines.append(f"| {tool} | {rank[tool].mean():.2f} | {int(rank[tool].notna().sum())} | "
                     f"{runs.cpu_s.mean():.0f} | {runs.cpu_s.sum() / 3600:.2f} |")
    lines += ["", "Wins / losses / ties over sets (by mean over seeds), row tool against column tool:", "",
              "| | " + " | ".join(tools) + " |", "|---|" + "---|" * len(tools)]
    for a in tools:
        cells = ["" if a == b else "{}/{}/{}".format(*wins_losses(means, lower, a, b)) for b in tools]
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines += ["", "Paired test over sets x seeds (Wilcoxon signed-rank, two-sided, on the relative improvement "
              "(error of B - error of A) / error of B, error = RMSE, MAE or 1 - ROC-AUC; positive: A better):", "",
              "| A | B | pairs | A better | median improvement | p |", "|---|---|---|---|---|---|"]
    for a, b in KEY_PAIRS:
        test = paired_test(frame, a, b)
        if test["n"]:
            lines.append(f"| {a} | {b} | {test['n']} | {test['wins']} | {100 * test['median']:+.1f}% | {test['p']:.3g} |")
    for reference in ("default", "pretrained", SCREEN_REFERENCE):
        table = relative_errors(frame[frame.set.map(lambda s: not SETS_BY_NAME[s].three_d)], reference)
        if not table.empty:
            lines += ["", f"Our recipes against `{reference}` on the 2-D sets: mean over (set, seed) pairs of "
                      f"error / error of `{reference}` (below 1: better):", "",
                      "| recipe | relative error | pairs | better in |", "|---|---|---|---|"]
            lines += [f"| {r['tool']} | {r['relative error']:.3f} | {r['pairs']} | {r['better']} |" for r in table.to_dict("records")]
    return lines


#: The screen's candidates are compared with the one pretrained like the shipped backbones.
SCREEN_REFERENCE = "screen-descriptors"


def _tool_arguments(tool: ToolSpec) -> str:
    """What a tool of ours adds to the ``train`` command line, its screen backbone included.

    Example:
        >>> _tool_arguments(TOOLS_BY_NAME["screen-atoms"])
        '--from-pretrained <screen>/atoms --freeze-backbone-epochs 5'
    """
    backbone = ["--from-pretrained", f"<screen>/{tool.settings['screen_backbone']}"] if "screen_backbone" in tool.settings else []
    return " ".join([*backbone, *map(str, tool.settings["args"])])


TOOLS_MARKDOWN = [
    "Tools (each child process with `OMP_NUM_THREADS=1`; `E` the set's epochs, `k` the seed; our runs add "
    "`--task classification` on classification sets, chemprop `--task-type classification`):", "",
    "- `default`: `dgl-graphtx train data.csv --targets target --split-col split --epochs E --seed k --threads 1 --out run`",
    "- `descriptors`: the same with `--features-generators rdkit2d` (RDKit 2-D descriptors beside the readout)",
    f"- `{FINE_TUNED}` (the fine-tuning recipe chosen on the development half): the same with `"
    f"{' '.join(TOOLS_BY_NAME[FINE_TUNED].settings['args'])}`; `{FINE_TUNED}+descriptors`: also `--features-generators rdkit2d`",
    "- screened on the development half's 2-D sets only (never run on the test half; `pretrained` trains every layer from the first "
    "epoch, `screen-<candidate>` fine-tunes a candidate backbone of "
    "`benchmarks/pretrain_screen.py`): "
    + ", ".join(f"`{t.name}` (`{_tool_arguments(t)}`)" for t in TOOLS if t.development_only),
    f"- `ensemble`: the same as `default` with `--ensemble-size {ENSEMBLE_SIZE}`; `moire-3d` (QM9 sets): `data.sdf` (DFT geometry) "
    f"with `{' '.join(TOOLS_BY_NAME['moire-3d'].settings['args'])}`",
    "- `default+ref` (QM9 sets): the 2-D default (SMILES) with `--set model.atom_reference=true`, the same per-element "
    "reference energies as `moire-3d`, so that the 3-D model is compared with a 2-D one of equal means",
    "- `chemprop` (v2.3.1, `.venv-bench`): `chemprop train --data-path data.csv --smiles-columns smiles --target-columns target "
    "--splits-column split --epochs E --data-seed k --pytorch-seed k --accelerator cpu --devices 1 --num-workers 0`; "
    "`chemprop+descriptors`: also `--molecule-featurizers v1_rdkit_2d_normalized`",
    "- `RF-morgan`: scikit-learn random forest, 500 trees, on radius-2 2,048-bit Morgan counts, fitted on train + validation; "
    "`RF-coulomb` (QM9 sets): the same on sorted Coulomb-matrix eigenvalues of the DFT geometry with hydrogens",
    "- `AttentiveFP`: dgllife's AttentiveFP (canonical features) trained by the library's Trainer with the default model's recipe "
    "(`benchmarks/_baselines.py`, as `pretrained_gain.py`)",
]


def sets_markdown(results: Path) -> List[str]:
    """The sets of the suite: source, licence, molecules (from ``splits.json``), task, split, half, why."""
    record = json.loads((results / "splits.json").read_text()) if (results / "splits.json").exists() else {}
    lines = ["| set | half | task (metric) | molecules | split | source (package: file) | licence | why |",
             "|---|---|---|---|---|---|---|---|"]
    for spec in SETS_BY_NAME.values():
        rows = next((sum(entry["rows"].values()) for name, entry in record.items() if name.startswith(spec.name + "/")), None)
        source = f"`{spec.source.package}` {spec.source.version}: " + ", ".join(f"`{m}`" for m in spec.source.members)
        size = "-" if rows is None else f"{rows:,}"
        lines.append(f"| {spec.name} | {spec.half} | {spec.task} ({spec.metric}) | {size} | {spec.split}, {spec.epochs} epochs "
                     f"| {source}; {spec.source.citation} | {spec.source.licence} | {spec.reason} |")
    return lines


def markdown(frame: pd.DataFrame, results: Path) -> str:
    """The docs section: the sets, then one block per half with results."""
    lines = ["## Transfer suite: every tool on the same split files", "",
             "`benchmarks/suite.py` (issue 28): sets, sources, licences, splits and the reason for each half in "
             "`benchmarks/_suite/config.py`; results per run (JSON and test predictions) in `benchmarks/suite_results/`. "
             "Scaffold splits 80/10/10 (random for FreeSolv and QM9), one split file per seed given unchanged to every "
             "tool; equal epochs; metrics computed by the suite from each tool's test predictions; mean ± std over "
             f"seeds, best per set in bold. Candidate recipe, chosen on the development half: `{RECOMMENDED}`.", "", *sets_markdown(results),
             "", *TOOLS_MARKDOWN]
    for half, title in HALVES.items():
        part = frame[frame.half == half]
        planned = sum(len(SEEDS) for s in SETS_BY_NAME.values() if s.half == half for t in TOOLS if t.runs_on(s))
        lines += ["", f"### {title}", "", f"{len(part)} of the {planned} runs ({len(SEEDS)} seeds x tools) finished.", ""]
        lines += half_markdown(part) if not part.empty else ["No results yet."]
    return "\n".join(lines)


def summary_table(frame: pd.DataFrame, tools: Sequence[str], sets: Sequence[str]) -> List[str]:
    """Mean ± std over seeds per set (rows) and tool (columns), the best per set in bold, a cell
    with fewer seeds than :data:`SEEDS` saying how many, "-" where a tool did not run.

    Example:
        >>> rows = [{"set": "FreeSolv", "seed": k, "tool": t, "metric": "rmse", "value": v}
        ...         for k, (d, r) in enumerate([(1.0, 2.0), (1.2, 2.0), (1.4, 2.0)]) for t, v in (("default", d), ("RF-morgan", r))]
        >>> print("\\n".join(summary_table(pd.DataFrame(rows[:5]), ["default", "RF-morgan", "chemprop"], ["FreeSolv"])))
        | set (metric) | default | RF-morgan | chemprop |
        |---|---|---|---|
        | FreeSolv (rmse) | **1.200 ± 0.200** | 2.000 ± 0.000 (2 seeds) | - |
    """
    lines = ["| set (metric) | " + " | ".join(tools) + " |", "|---|" + "---|" * len(tools)]
    lower = _lower_is_better(frame)
    for name in sets:
        part = frame[frame.set == name]
        values = {tool: part[part.tool == tool]["value"] for tool in tools}
        means = [v.mean() for v in values.values() if not v.empty]
        best = min(means) if lower[name] else max(means)
        cells = []
        for v in values.values():
            cell = _cell(v) + ("" if v.empty or len(v) == len(SEEDS) else f" ({len(v)} seed{'s' if len(v) > 1 else ''})")
            cells.append(f"**{cell}**" if not v.empty and np.isclose(v.mean(), best) else cell)
        lines.append(f"| {name} ({part['metric'].iloc[0]}) | " + " | ".join(cells) + " |")
    return lines


#: The README's accuracy tables: the test half, our default and recipes beside the peers.
README_TOOLS = ("default", RECOMMENDED, FINE_TUNED, "chemprop", "chemprop+descriptors", "RF-morgan", "AttentiveFP")
README_3D_TOOLS = ("moire-3d", "default+ref", "default", "descriptors", "chemprop", "AttentiveFP", "RF-coulomb")


def readme_markdown(frame: pd.DataFrame) -> str:
    """The test half's tables for the README (2-D sets, then the quantum set)."""
    test = frame[frame.half == "test"]
    flat = [s for s in SETS_BY_NAME if s in set(test.set) and not SETS_BY_NAME[s].three_d]
    three_d = [s for s in SETS_BY_NAME if s in set(test.set) and SETS_BY_NAME[s].three_d]
    lines = summary_table(test, README_TOOLS, flat) if flat else []
    lines += ["", *summary_table(test, README_3D_TOOLS, three_d)] if three_d else []
    return "\n".join(lines)


FIGURE = Path(__file__).resolve().parents[2] / "docs" / "img" / "suite.png"
README = Path(__file__).resolve().parents[2] / "README.md"


def write_report(results: Path, docs: bool) -> int:
    """Print the report from ``results`` and (with ``docs``) write it and its figure into docs/."""
    frame = load_results(results)
    text = markdown(frame, results)
    print(text)
    if docs:
        from .figure import draw, improvements

        if not frame.empty and not improvements(frame).empty:
            text += f"\n\n![each tool against chemprop per set and seed](img/{FIGURE.name})"
            print(f"figure written to {draw(frame, FIGURE)}")
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        import _report

        print(f"updated {_report.update_section('suite', text)}")
        if not frame[frame.half == "test"].empty:
            print(f"updated {_report.update_section('suite-test', readme_markdown(frame), path=README)}")
    return 0
