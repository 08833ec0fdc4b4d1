"""Row buffers that grow by doubling into unfilled memory (a vector index's rows, keys and
norms, and their int8 codes)."""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

Buffer = TypeVar("Buffer", bound=npt.NDArray[Any])


def enlarged(rows: Buffer, capacity: int, filled: int) -> Buffer:
    """A copy of `rows` with room for `capacity` rows, the first `filled` copied, the rest
    left unfilled (`np.empty`: their room costs no memory until rows fill it)."""
    larger = np.empty((capacity, *rows.shape[1:]), dtype=rows.dtype)
    larger[:filled] = rows[:filled]
    return larger  # type: ignore[return-value]
