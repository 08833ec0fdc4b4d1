"""A local web page to look at stored conversations: `chatmemory inspect`, or `create_app`.

```python
import uvicorn
from chatmemory.inspector import create_app
uvicorn.run(create_app(store), host="127.0.0.1", port=8765)
```

Needs the `inspect` extra (``pip install 'chatmemory[inspect]'``: Starlette, Jinja2, uvicorn).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["create_app"]

if TYPE_CHECKING:
    from ._app import create_app


def __getattr__(name: str) -> Any:
    if name == "create_app":
        try:
            from ._app import create_app
        except ImportError as error:
            if (error.name or "").partition(".")[0] not in ("starlette", "jinja2"):
                raise
            raise ImportError(
                "the inspector needs its extra: pip install 'chatmemory[inspect]'",
                name=error.name,
            ) from None
        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
