"""`HashingEmbeddingModel`: embeddings with no model at all, deterministic and offline."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

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
        vector = [0.0] * self._dimension
        for word in _WORD.findall(text.lower()):
            self._add(vector, "w:" + word, 1.0)
            padded = f"<{word}>"
            for i in range(len(padded) - 2):
                self._add(vector, "t:" + padded[i : i + 3], 0.5)
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0:  # no words: a fixed vector, so blank texts are near each other only
            vector[0], norm = 1.0, 1.0
        return Embedding(tuple(x / norm for x in vector))

    def _add(self, vector: list[float], feature: str, weight: float) -> None:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        number = int.from_bytes(digest, "little")
        vector[number % self._dimension] += weight if (number >> 63) & 1 else -weight
