"""A real MCP server for the MCP tests, written with the SDK's server side.

``python mcp_server.py stdio`` speaks over stdin/stdout; ``python mcp_server.py http PORT`` serves
streamable HTTP on 127.0.0.1:PORT at /mcp.
"""

from __future__ import annotations

import base64
import os
import sys
import threading
import time

from mcp.server.mcpserver import Image, MCPServer

server = MCPServer("chatmemory-tests", log_level="ERROR")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def whoami() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def pixel() -> Image:
    """A one-pixel PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def refuse(reason: str) -> str:
    """Fail with `reason`."""
    raise ValueError(reason)


@server.tool()
def crash() -> str:
    """The server process dies mid-call."""
    os._exit(3)


@server.tool()
def leave() -> str:
    """Answer, then the process exits on its own."""
    threading.Timer(0.1, os._exit, (0,)).start()
    return "bye"


@server.tool()
def sleep(seconds: float) -> str:
    """Answer after `seconds`."""
    time.sleep(seconds)
    return "awake"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
