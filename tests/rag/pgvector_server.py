"""A private PostgreSQL 16 with pgvector for the tests, from the `pgserver` wheel (the machine's
PostgreSQL may lack the extension). `CHATMEMORY_TEST_PGVECTOR_DSN` points at a server of your
own instead."""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def pgvector_dsn() -> Iterator[str]:
    """A DSN of a server with pgvector; raises RuntimeError saying why there is none."""
    given = os.environ.get("CHATMEMORY_TEST_PGVECTOR_DSN")
    if given:
        yield given
        return
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        try:
            from pgserver.postgres_server import get_server
        except ImportError as error:
            raise RuntimeError(f"pgserver is not installed ({error})") from error
    with tempfile.TemporaryDirectory(prefix="chatmemory-pgvector-") as directory:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                server = get_server(directory, cleanup_mode="stop")
            except Exception as error:
                raise RuntimeError(f"pgserver could not start PostgreSQL ({error})") from error
        try:
            yield server.get_uri()
        finally:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server.cleanup()
