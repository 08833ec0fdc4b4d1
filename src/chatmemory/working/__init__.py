"""Working memory: a record the model keeps about each user (shared by all of their
conversations; or one per conversation with ``scope="memory"``), shown in its system message and
changed by patches through a built-in tool (Mastra's working memory, without its full-replace
and lost-update bugs).

```python
from chatmemory.working import SqliteRecordStore, WorkingMemory
memory = WorkingMemory(SqliteRecordStore("chat.db"))
assistant = ai_service(Assistant, chat_model=model, chat_memory_provider=..., working_memory=memory)
# Assistant's methods mark the user's id: user: Annotated[str, UserId]
```

`RedisRecordStore` (``chatmemory.working.redis``) and `PostgresRecordStore`
(``chatmemory.working.postgres``) keep the records beside those stores' conversations.
"""

from ._memory import DEFAULT_TEMPLATE, Scope, WorkingMemory, WorkingMemoryTool
from ._patch import merge_patch, replace_section
from ._records import InMemoryRecordStore, Record, RecordStore, SqliteRecordStore

__all__ = [
    "DEFAULT_TEMPLATE",
    "InMemoryRecordStore",
    "Record",
    "RecordStore",
    "Scope",
    "SqliteRecordStore",
    "WorkingMemory",
    "WorkingMemoryTool",
    "merge_patch",
    "replace_section",
]
