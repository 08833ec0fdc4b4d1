"""`HashingEmbeddingModel`: embeddings with no model at all, deterministic and offline."""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .._errors import ConfigurationError
from ._embeddings import Embedding

__all__ = ["HashingEmbeddingModel"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbeddingModel:
    """Feature hashing of words and character trigrams into `dimension` signed buckets,
    L2-normalised: texts that share words (or most of a word) are near. No weights, no
    download, the same vector on every machine: for tests, demos and a first offline run.
    It knows nothing of meaning ("car" and "automobile" are far apart): use a real model
    (`LocalEmbeddingModel`, `OpenAiEmbeddingModel`) for semantic search."""

    def __init__(self, dimension: int = 384) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 8:
            raise ConfigurationError(f"`dimension` must be an int >= 8, got {dimension!r}")
        self._dimension = dimension

    def __repr__(self) -> str:
        return f"HashingEmbeddingModel(dimension={self._dimension})"

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def model_name(self) -> str:
        return "hashing-v1"

    def embed_all(self, texts: Sequence[str]) -> list[Embedding]:
        if isinstance(texts, str):
            raise ConfigurationError("embed_all() takes a list of texts; wrap one text in [ ]")
        return [self._embed(text) for text in texts]

    async def aembed_all(self, texts: Sequence[str]) -> list[Embedding]:
        return self.embed_all(texts)

    def _embed(self, text: str) -> Embedding:
        if not isinstance(text, str):
            raise ConfigurationError(f"only text can be embedded, got {text!r}")
        found = [_features(word, self._dimension) for word in _WORD.findall(text.lower())]
        if found:  # bincount adds in input order: the sums hashing-v1 always had
            vector = np.bincount(
                np.concatenate([f[0] for f in found]),
                weights=np.concatenate([f[1] for f in found]),
                minlength=self._dimension,
            )
        else:
            vector = np.zeros(self._dimension, dtype=np.float64)
        norm = math.sqrt(sum(x * x for x in vector.tolist()))  # as hashing-v1 always did
        if norm == 0:  # no words: a fixed vector, so blank texts are near each other only
            vector[0], norm = 1.0, 1.0
        return Embedding.trusted((vector / norm).tolist())


@functools.lru_cache(maxsize=1 << 16)
def _features(word: str, dimension: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """The signed buckets of a word: the word itself (weight 1) and its character trigrams,
    with < and > marking its ends (weight 0.5 each). Words repeat, so they are hashed once."""
    padded = f"<{word}>"
    features = [("w:" + word, 1.0)]
    features += [("t:" + padded[i : i + 3], 0.5) for i in range(len(padded) - 2)]
    buckets = np.empty(len(features), dtype=np.intp)
    signs = np.empty(len(features), dtype=np.float64)
    for n, (feature, weight) in enumerate(features):
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        number = int.from_bytes(digest, "little")
        buckets[n] = number % dimension
        signs[n] = weight if (number >> 63) & 1 else -weight
    return buckets, signs
