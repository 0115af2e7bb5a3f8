"""The range of float32, the type of stored labels and of the model's extra feature inputs: larger
magnitudes would become ``inf``, so values beyond it are masked as unusable."""
from __future__ import annotations

import numpy as np

#: Largest finite float32.
FLOAT32_MAX = float(np.finfo(np.float32).max)
