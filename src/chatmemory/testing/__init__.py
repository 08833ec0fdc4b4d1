"""Test helpers for applications built on chatmemory.

`ScriptedChatModel` stands in for a real chat model in your tests: it answers from a script (or
a function of the request), records every request it receives, and works sync, async and
streaming, so the code under test runs unchanged. `ScriptedModerationModel` flags the texts a
rule names, for services with `@moderate` methods.
"""

from ._moderation import ScriptedModerationModel
from ._scripted import Answer, ScriptedChatModel

__all__ = ["Answer", "ScriptedChatModel", "ScriptedModerationModel"]
