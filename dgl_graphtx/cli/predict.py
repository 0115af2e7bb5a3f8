"""``dgl-graphtx predict``: predictions for SMILES given as arguments or in a molecule file."""
from __future__ import annotations

import argparse
import sys

from ..errors import ConfigError
from ..featurize import SizeLimits
from ..inference.explain import MAX_STEPS, ExplainSettings
from ..inference.prediction_job import PredictionJob, run_prediction
from ..inference.prediction_shards import check_joinable
from ..inference.predictor import BATCH_EDGES, BATCH_SIZE, CHUNK_SIZE, Predictor
from ..insight.integrated_gradients import BASELINES, DEFAULT_STEPS
from ..uncertainty import METHODS, UncertaintyConfig, uncertainty_method
from ..runs.distributed import check_processes, launch_local, launched_by_torchrun
from ..runs.sharded_prediction import predict_in_processes
from .common import (SMILES_COL, add_device_option, add_input_options, add_logging_options, add_row_options, add_threads_option, bounded,
                     library_default, molecule_columns, print_table, verbosity, without_option)
from .molecule_io import add_carry_options, add_checkpoint_option, check_smiles_arguments


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command to ``sub``."""
    predict = sub.add_parser("predict", help="predict SMILES with a checkpoint",
                             description="Predict from SMILES given as arguments or in a file (CSV/TSV, SDF, .smi, .xyz, gzipped "
                                         "too); invalid molecules get NaN and an error message.")
    predict.add_argument("smiles", nargs="*", help="SMILES strings (or use --input)")
    add_checkpoint_option(predict, ensembles=True)
    predict.add_argument("--input", help="molecule file: CSV/TSV with a SMILES column, SDF, .smi or .xyz")
    add_input_options(predict)
    add_row_options(predict)
    add_carry_options(predict)
    predict.add_argument("--output", help="write the table to this file: .csv, .tsv or .parquet (default: print it); a model with "
                                          "atom- or bond-level targets also writes <output>_atoms and <output>_bonds, long tables "
                                          "of one row per atom / bond")
    predict.add_argument("--sdf-output", metavar="FILE.sdf", help="also write the predicted molecules to an SDF, the predictions "
                                                                  "as SD properties (atom and bond values as atom.dprop / "
                                                                  "bond.dprop lists)")
    add_device_option(predict)
    add_threads_option(predict)
    predict.add_argument("--batch-size", type=bounded(int, 1), default=BATCH_SIZE,
                         help=f"most molecules per forward pass (default: {BATCH_SIZE})")
    predict.add_argument("--batch-edges", type=bounded(int, 1), default=BATCH_EDGES,
                         help=f"most relation-graph edges per forward pass, bounding its memory (default: {BATCH_EDGES:,})")
    predict.add_argument("--max-atoms", type=bounded(int, 1), default=SizeLimits.max_atoms,
                         help=f"molecules with more atoms get NaN and an error (default: {SizeLimits.max_atoms})")
    predict.add_argument("--max-relation-edges", type=bounded(int, 1), default=SizeLimits.max_relation_edges,
                         help=f"molecules with more relation-graph edges get NaN and an error (default: {SizeLimits.max_relation_edges})")
    predict.add_argument("--chunk-size", type=bounded(int, 1), default=CHUNK_SIZE,
                         help=f"molecules featurized and written per step; memory does not grow with the input (default: {CHUNK_SIZE})")
    workers = library_default(Predictor, "workers")
    predict.add_argument("--workers", type=bounded(int, 1), default=workers,
                         help=f"processes featurizing the molecules (default: {workers}; up to the number of cores: "
                              "featurization is most of a prediction's time on the CPU)")
    predict.add_argument("--uncertainty", choices=[m for m in METHODS if uncertainty_method(m).std != "members"], default=None,
                         help="uncertainty method (default: the one the checkpoint was trained with): adds <target>_std, and "
                              "<target>_lo/_hi when the checkpoint holds a calibration for it; mc_dropout works with any model")
    predict.add_argument("--mc-samples", type=bounded(int, 2, 10000), default=None,
                         help=f"stochastic passes of MC dropout (default: the checkpoint's, else {UncertaintyConfig.mc_samples})")
    predict.add_argument("--explain", action="store_true",
                         help="explain each prediction atom by atom (integrated gradients): adds <target>_baseline and "
                              "<target>_contributions, a list in the order of the input's atoms that sums to the model's "
                              "output minus the baseline (docs/insight.md)")
    predict.add_argument("--explain-target", metavar="TARGET", help="--explain: the target to explain (default: the first)")
    predict.add_argument("--explain-steps", type=bounded(int, 2, MAX_STEPS), default=None,
                         help=f"--explain: integration steps, the passes per molecule (default: {DEFAULT_STEPS})")
    predict.add_argument("--explain-baseline", choices=BASELINES, default=None,
                         help="--explain: where the integral starts: atom embeddings 0, the molecule's mean atom, or auto "
                              "(mean for pre-LN transformers, zero for GPS models such as Gradformer; docs/insight.md)")
    predict.add_argument("--no-capture", action="store_true",
                         help="on a GPU, run every batch eagerly instead of replaying the pass recorded (a CUDA graph) for "
                              "each padded batch shape")
    predict.add_argument("--resume", action="store_true", help="continue an --output left as .partial by an interrupted run")
    predict.add_argument("--nproc", type=bounded(int, 1), default=1,
                         help="processes on this machine (torchrun's elastic launcher), each predicting a contiguous shard of "
                              "the rows on a device of its own (one GPU each where there are GPUs) into a part beside the "
                              "--output (.csv/.tsv), joined into it in input order at the end (default: 1)")
    predict.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_logging_options(predict)
    predict.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``predict`` with parsed ``args``."""
    check_smiles_arguments(args.smiles)
    limits = SizeLimits(max_atoms=args.max_atoms, max_relation_edges=args.max_relation_edges)
    settings = (args.explain_target, args.explain_steps, args.explain_baseline)
    if not args.explain and any(value is not None for value in settings):
        raise ConfigError("--explain-target, --explain-steps and --explain-baseline are settings of --explain: add --explain")
    explain = (ExplainSettings(args.explain_target, args.explain_steps or DEFAULT_STEPS, args.explain_baseline or "auto")
               if args.explain else None)
    options = dict(device=args.device, batch_size=args.batch_size, limits=limits, batch_edges=args.batch_edges,
                   chunk_size=args.chunk_size, workers=args.workers, uncertainty=args.uncertainty, mc_samples=args.mc_samples,
                   explain=explain, capture=not args.no_capture)
    show = verbosity(args) >= 0 and not args.no_progress and bool(args.input) and sys.stderr.isatty()
    job = PredictionJob(args.checkpoint, smiles=args.smiles, input=args.input, smiles_col=args.smiles_col or SMILES_COL,
                        delimiter=args.delimiter, id_col=args.id_col, keep_cols=args.keep_cols,
                        molecule_columns=molecule_columns(args), output=args.output, sdf_output=args.sdf_output,
                        resume=args.resume, predictor=options, progress=show,
                        shard=(0, args.nproc) if args.nproc > 1 or launched_by_torchrun() else None)  # checks the output for shards
    if args.nproc > 1:
        check_processes(args.nproc, args.device)
        check_joinable(args.output)
        return launch_local(args.nproc, without_option(args.argv, "--nproc"))
    done = predict_in_processes(job) if launched_by_torchrun() else run_prediction(job)
    if done is None:  # a process of several other than the main one
        return 0
    if done.table is None:
        print(done.describe())
        return 0
    print_table(done.table)
    for level, table in done.levels.items():
        print(f"\n{level}s:")
        print_table(table)
    return 0
