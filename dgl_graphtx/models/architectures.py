"""The model architectures a variant's attention layers can run in, and the settings of the GPS
block (:class:`GPSOptions`, the ``model.gps`` config section)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from .local_models import LOCAL_MODELS

#: Model architectures (see :func:`~dgl_graphtx.models.build_model`): ``transformer`` (pre-LN
#: blocks, :class:`~dgl_graphtx.models.GraphTransformer`) or ``gps`` (GPS blocks with a local model
#: over bonds, :class:`~dgl_graphtx.models.GPSModel`). Any variant's attention runs in either.
ARCHITECTURES = ("transformer", "gps")

#: Normalisations of the GPS block.
GPS_NORMS = ("batch", "layer")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass(frozen=True)
class GPSOptions:
    """Settings of the GPS block: its normalisation (``"batch"`` or ``"layer"``) and its local
    model over bonds (``"gine"`` or ``"gatedgcn"``, see :mod:`~dgl_graphtx.models.local_models`),
    whose edges ``pe_gate`` (GatedGCN only) gates by the random-walk encodings, as the Gradformer
    authors' MolHIV model. The global attention is the config's variant.

    Example:
        >>> GPSOptions(local_model="gatedgcn", pe_gate=True).local_model
        'gatedgcn'
    """

    norm: str = "batch"
    local_model: str = "gine"
    pe_gate: bool = False

    def __post_init__(self) -> None:
        _check(self.local_model in LOCAL_MODELS, f"gps.local_model must be one of {LOCAL_MODELS}, got {self.local_model!r}")
        _check(not self.pe_gate or self.local_model == "gatedgcn", "gps.pe_gate needs gps.local_model='gatedgcn'")
        _check(self.norm in GPS_NORMS, f"gps.norm must be one of {GPS_NORMS}, got {self.norm!r}")
