"""Semantic recall: the messages of the history most like what the user just said, brought back
beside the window (Mastra's `semanticRecall`, without its cross-user leaks).

```python
recall = SemanticRecall(HashingEmbeddingModel(), SqliteEmbeddingStore("chat.db"), top_k=2)
recall.index(store, "ann")                    # embed what is new in ann's history
found = recall.recall(store, "ann", "what was my locker code?")
print(recall.block(found))                    # the text a model call gets
```

Every message with text is embedded (tool calls and results are not; long text is split into
chunks), with its memory id, user id and sequence number as metadata. A recall embeds the query
(cached), finds the `top_k` nearest messages that are no longer in the window, and returns each
with `message_range` neighbours on either side (or ``(before, after)``, as Mastra's
``messageRange: {before, after}``), whole tool exchanges only, without repeats. With
`scope="user"` it searches every conversation of the same user; the user id is a filter of the
store query, so one user never sees another's messages.

Indexing is idempotent (ids derive from the memory id, sequence number and chunk) and
incremental (a mark per memory id records how far it went), so `index` after every turn costs
the new messages, and after a crash or an import it catches up.

Nothing kept here outlives what it was read from. A memory id that was deleted and used again
starts a new *life* (`WindowSnapshot.life`) whose sequence numbers start over: what this process
keeps of a conversation (its history, how far it is indexed) is for one life only, index
entries and marks carry the life they were made in, and the first index of a new life removes
what the old one left. Finding entries to remove or marks to read is an exact metadata lookup
(`MetadataSelect.select`), never a nearest-neighbour search.

In a service (`ai_service(..., semantic_recall=recall)`), what is recalled reaches the model as
one delimited block at the end of the system message, for every model call of the turn, and is
never stored: the system message is where context that is not the user's own words belongs (the
user's text is sent verbatim), and providers read it before the conversation. The block is cut
to `recall_budget` tokens, and the window gives up its oldest messages (whole tool groups) until
the request fits the memory's own budget again.
"""

from ._block import with_recall
from ._index import KIND
from ._search import RecalledMessages
from ._semantic import SemanticRecall

__all__ = ["KIND", "RecalledMessages", "SemanticRecall", "with_recall"]
