"""Connections a network store keeps checked out of its client's pool between calls."""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["Idle"]

T = TypeVar("T")


class Idle(Generic[T]):
    """The idle ones, the newest last, at most a quarter of the pool's limit.

    The Redis and PostgreSQL stores keep the connection they used last rather than pay the
    pool's checkout and return on every call. The quarter leaves the pool's other users their
    connections: a pool of 1 to 3 gets each one back after every call. Each connection serves
    one caller at a time: `take` and `keep` are a list's pop and append, atomic in threads.
    """

    __slots__ = ("_closed", "_idle", "_spare")

    def __init__(self, limit: object) -> None:
        """`limit`: the pool's maximum number of connections (anything else keeps none)."""
        self._spare = limit // 4 if isinstance(limit, int) else 0
        self._idle: list[T] = []
        self._closed = False

    def take(self) -> T | None:
        """The connection kept last, or None (then the caller asks the pool)."""
        try:
            return self._idle.pop()
        except IndexError:
            return None

    def keep(self, item: T) -> bool:
        """Keep `item` unless the store is closed or the quarter is full (then False: the
        caller gives it back to the pool)."""
        if self._closed or len(self._idle) >= self._spare:
            return False
        self._idle.append(item)
        return True

    def forget(self) -> None:
        """Drop the idle ones without giving them back (they belong to a parent process)."""
        self._idle = []

    def close(self) -> list[T]:
        """The idle ones, for the caller to give back; none is kept from now on."""
        self._closed = True
        idle, self._idle = self._idle, []
        return idle
