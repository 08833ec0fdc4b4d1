"""Retrieval augmentation (LangChain4j's RAG pipeline): transform the user's query, route it to
content retrievers, fuse what they find, and inject it into the user message.

```python
from chatmemory.rag import DefaultRetrievalAugmentor, EmbeddingStoreContentRetriever
augmentor = DefaultRetrievalAugmentor(
    content_retriever=EmbeddingStoreContentRetriever(store, embedding_model, max_results=5)
)
```

`PgVectorEmbeddingStore` (PostgreSQL with pgvector) loads its driver on first use:
``pip install 'chatmemory[pgvector]'``.
"""

import importlib
from typing import TYPE_CHECKING

from ._aggregation import (
    DefaultContentAggregator,
    ReciprocalRankFuser,
    ReRankingContentAggregator,
    ScoringModel,
)
from ._approximate import Hnsw
from ._augmentor import (
    AugmentationRequest,
    AugmentationResult,
    DefaultContentInjector,
    DefaultRetrievalAugmentor,
    RetrievalAugmentor,
)
from ._documents import Document, DocumentKey, load_document
from ._embeddings import (
    AsyncEmbeddingModel,
    Embedding,
    EmbeddingMatch,
    EmbeddingModel,
    EmbeddingSearchRequest,
    EmbeddingSearchResult,
    EmbeddingStore,
    FullTextSearch,
    MetadataSelect,
    cosine_similarity,
    relevance_score,
)
from ._filter_parser import FilterSyntaxError, SqlFilterParser, parse_filter
from ._filters import Filter, MetadataKey, key
from ._hashing import HashingEmbeddingModel
from ._in_memory import InMemoryEmbeddingStore
from ._ingest import Ingestor, IngestProgress, IngestReport
from ._input_types import InputType, PrefixedEmbeddingModel
from ._listeners import (
    ContentRetrieverErrorContext,
    ContentRetrieverListener,
    ContentRetrieverRequestContext,
    ContentRetrieverResponseContext,
)
from ._rerank import RerankScoringModel
from ._retrievers import (
    EmbeddingStoreContentRetriever,
    FullTextContentRetriever,
    HybridContentRetriever,
)
from ._splitters import (
    DocumentSplitter,
    LineSplitter,
    ParagraphSplitter,
    RegexSplitter,
    SentenceSplitter,
    WordSplitter,
    recursive_splitter,
)
from ._stages import (
    CompressingQueryTransformer,
    ContentAggregator,
    ContentInjector,
    ContentRetriever,
    DefaultQueryRouter,
    DefaultQueryTransformer,
    ExpandingQueryTransformer,
    LanguageModelFilterBuilder,
    LanguageModelQueryRouter,
    QueryRouter,
    QueryTransformer,
)
from ._values import Content, ContentKey, Query, QueryMetadata, TextSegment
from ._web import (
    AsyncWebSearchEngine,
    SearxngWebSearchEngine,
    WebSearchContentRetriever,
    WebSearchEngine,
    WebSearchResult,
)

if TYPE_CHECKING:
    from ._local import LocalEmbeddingModel
    from ._openai import OpenAiEmbeddingModel
    from .pgvector import PgVectorEmbeddingStore
    from .sqlite import SqliteEmbeddingStore

__all__ = [
    "AsyncEmbeddingModel",
    "AsyncWebSearchEngine",
    "AugmentationRequest",
    "AugmentationResult",
    "CompressingQueryTransformer",
    "Content",
    "ContentAggregator",
    "ContentInjector",
    "ContentKey",
    "ContentRetriever",
    "ContentRetrieverErrorContext",
    "ContentRetrieverListener",
    "ContentRetrieverRequestContext",
    "ContentRetrieverResponseContext",
    "DefaultContentAggregator",
    "DefaultContentInjector",
    "DefaultQueryRouter",
    "DefaultQueryTransformer",
    "DefaultRetrievalAugmentor",
    "Document",
    "DocumentKey",
    "DocumentSplitter",
    "Embedding",
    "EmbeddingMatch",
    "EmbeddingModel",
    "EmbeddingSearchRequest",
    "EmbeddingSearchResult",
    "EmbeddingStore",
    "EmbeddingStoreContentRetriever",
    "ExpandingQueryTransformer",
    "Filter",
    "FilterSyntaxError",
    "FullTextContentRetriever",
    "FullTextSearch",
    "HashingEmbeddingModel",
    "Hnsw",
    "HybridContentRetriever",
    "InMemoryEmbeddingStore",
    "IngestProgress",
    "IngestReport",
    "Ingestor",
    "InputType",
    "LanguageModelFilterBuilder",
    "LanguageModelQueryRouter",
    "LineSplitter",
    "LocalEmbeddingModel",
    "MetadataKey",
    "MetadataSelect",
    "OpenAiEmbeddingModel",
    "ParagraphSplitter",
    "PgVectorEmbeddingStore",
    "PrefixedEmbeddingModel",
    "Query",
    "QueryMetadata",
    "QueryRouter",
    "QueryTransformer",
    "ReRankingContentAggregator",
    "ReciprocalRankFuser",
    "RegexSplitter",
    "RerankScoringModel",
    "RetrievalAugmentor",
    "ScoringModel",
    "SearxngWebSearchEngine",
    "SentenceSplitter",
    "SqlFilterParser",
    "SqliteEmbeddingStore",
    "TextSegment",
    "WebSearchContentRetriever",
    "WebSearchEngine",
    "WebSearchResult",
    "WordSplitter",
    "cosine_similarity",
    "key",
    "load_document",
    "parse_filter",
    "recursive_splitter",
    "relevance_score",
]

# Stores whose driver is an optional extra: imported on first use.
_LAZY = {
    "PgVectorEmbeddingStore": ".pgvector",
    "SqliteEmbeddingStore": ".sqlite",
    "LocalEmbeddingModel": "._local",
    "OpenAiEmbeddingModel": "._openai",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)
