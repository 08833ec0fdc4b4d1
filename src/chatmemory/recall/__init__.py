"""Semantic recall: the messages of the history most like what the user just said, brought back
beside the window (Mastra's `semanticRecall`, without its cross-user leaks).

```python
recall = SemanticRecall(HashingEmbeddingModel(), SqliteEmbeddingStore("chat.db"))
recall.index(store, "ann")                    # embed what is new in ann's history
found = recall.recall(store, "ann", "what was my locker code?")
print(recall.block(found))                    # the text a model call gets
```

Every message with text is indexed (tool calls and results are not; long text is split into
chunks) as its words, after the speaker's name when the user message has one ("Ann: ..."), with
its memory id, user id, sequence number, speaker and day as metadata. A recall embeds the query
(cached) and sends one request carrying the embedding and the text, so a store that also
searches words answers with both rankings fused (`hybrid=False`: vectors alone). It then spends
its budget (`top_k` matches, `max_messages` messages) on matches that are no longer in the
window and repeat no match taken (nearly the same words), each with its
neighbours where they add (`message_range="auto"`: a matched question's answer, a short reply's
question, whole tool exchanges), or `message_range` on either side (``(before, after)`` as
Mastra's ``messageRange: {before, after}``). With `scope="user"` it searches every conversation
of the same user; the user id is a filter of the store query, so one user never sees another's
messages.

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

from ._search import RecalledMessages
from ._semantic import SemanticRecall

__all__ = ["RecalledMessages", "SemanticRecall"]
