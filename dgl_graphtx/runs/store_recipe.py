"""Which model a featurized store was made for: ``featurize`` records ``--model``, ``--preset``
and ``--atom-features`` in ``STORE/featurized_for.json``, ``train STORE`` takes them when the
command line names no model, and a store featurized for other settings is refused in CLI terms."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional, Union

from ..atomic_io import atomic_write_text
from ..datasets import MoleculeDataset
from ..datasets.sharded_store import store_atom_budget
from ..errors import ConfigError, DamagedFileError
from ..featurize import FeaturizerConfig
from ..relation_graph import RelationConfig
from ..saved_files import read_json

PathLike = Union[str, Path]
RECIPE_FILE = "featurized_for.json"
RECIPE_KEYS = ("model", "preset", "atom_features")


def write_store_recipe(store: PathLike, model: str, preset: str, atom_features: str) -> Path:
    """Record the model, preset and atom features a store was featurized for.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> _ = write_store_recipe(folder, "moire", "3d", "ogb")
        >>> read_store_recipe(folder)
        {'model': 'moire', 'preset': '3d', 'atom_features': 'ogb'}
    """
    return atomic_write_text(json.dumps({"model": model, "preset": preset, "atom_features": atom_features}), Path(store) / RECIPE_FILE)


def read_store_recipe(store: PathLike) -> Optional[Dict[str, str]]:
    """What :func:`write_store_recipe` recorded, or ``None`` (a store made from Python); a damaged
    recipe is a :class:`~dgl_graphtx.errors.DamagedFileError`."""
    path = Path(store) / RECIPE_FILE
    fix = f"run 'dgl-graphtx featurize' on its input again (--out {store}, the --model/--preset it was made for)"
    recipe = read_json(path, fix, optional=True)
    if recipe is not None and not all(isinstance(recipe.get(key), str) for key in RECIPE_KEYS):
        raise DamagedFileError(f"{path} is damaged: it should give {', '.join(RECIPE_KEYS)} as text, it holds {recipe}; {fix}")
    return recipe


def recipe_flags(recipe: Dict[str, str]) -> Dict[str, Any]:
    """The ``train`` configuration fields a recipe sets.

    Example:
        >>> recipe_flags({"model": "moire", "preset": "3d", "atom_features": "ogb"})
        {'preset.model': 'moire', 'preset.name': '3d', 'featurizer.atom_features': 'ogb'}
    """
    return {"preset.model": recipe["model"], "preset.name": recipe["preset"], "featurizer.atom_features": recipe["atom_features"]}


def check_store_settings(store: PathLike, dataset: MoleculeDataset, featurizer: FeaturizerConfig, relation: RelationConfig,
                         max_atoms: int) -> None:
    """Refuse a store featurized with other settings than the run's, or within another atom budget
    than the run's ``max_atoms`` (``data.max_atoms``), naming the differences and the flags that fix it."""
    budget = store_atom_budget(store)
    if budget != max_atoms:
        within = f"within an atom budget of {budget}" if budget is not None else "without an atom budget"
        keep = f"train with --set data.max_atoms={budget}, or " if budget is not None else ""
        raise ConfigError(f"store {store} was featurized {within} (featurize --max-atoms) and this run asks for {max_atoms} "
                          f"(data.max_atoms): {keep}featurize it again with --max-atoms {max_atoms}")
    recipe = read_store_recipe(store)
    made = (f"it was featurized for --model {recipe['model']} --preset {recipe['preset']} --atom-features "
            f"{recipe['atom_features']}: train with those flags (or without --model/--preset, to take them from the store), or "
            if recipe else "")
    dataset.check_featurized_as(featurizer, relation, "this run", f"{made}featurize it again with this run's --model/--preset",
                                name=f"store {store}")
