"""A throwaway Redis Cluster on loopback: 3 primaries with one replica each, from the machine's
`redis-server` and `redis-cli --cluster create`, in a temporary directory, torn down after.

The tests (`tests/stores/backend_redis_cluster.py`, the failover test) and the cluster benchmark
start one with `LocalCluster.start()`. Nodes run with `cluster-node-timeout` 1000 ms, so a
replica is promoted a second or two after its primary dies; nothing is saved to disk.
"""

from __future__ import annotations

import atexit
import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import server_unavailable

try:
    import redis.cluster
except ImportError:  # pragma: no cover - the extra is part of the test dependencies
    redis = None  # type: ignore[assignment]

__all__ = ["ClusterUnavailable", "LocalCluster", "client", "cluster_url", "session_cluster"]

NODE_TIMEOUT_MS = 1000


class ClusterUnavailable(RuntimeError):
    """The cluster cannot be started here; the message says why."""


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports(count: int) -> list[int]:
    """`count` consecutive free ports whose cluster-bus ports (+10000) are free too."""
    for _ in range(50):
        base = random.randrange(20000, 25000)
        ports = list(range(base, base + count))
        if all(_free(port) and _free(port + 10000) for port in ports):
            return ports
    raise ClusterUnavailable("no free loopback ports for a cluster")


@dataclass
class LocalCluster:
    directory: Path
    ports: list[int]
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """A redis-py URL of one node (RedisCluster.from_url finds the others)."""
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    @classmethod
    def start(cls, primaries: int = 3, replicas: int = 1) -> LocalCluster:
        """Start the nodes, join them, and wait until every slot is served and every replica
        has synced; `ClusterUnavailable` when `redis-server` is missing or a step fails."""
        server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
        if server is None or cli is None:
            raise ClusterUnavailable("redis-server and redis-cli are not on PATH")
        cluster = cls(Path(tempfile.mkdtemp(prefix="chatmemory-cluster-")), [])
        try:
            cluster.ports = _ports(primaries * (1 + replicas))
            for port in cluster.ports:
                cluster._spawn(server, port)
            for port in cluster.ports:
                cluster._await_ping(port)
            addresses = [f"127.0.0.1:{port}" for port in cluster.ports]
            created = subprocess.run(
                [
                    *(cli, "--cluster", "create", *addresses),
                    *("--cluster-yes", "--cluster-replicas", str(replicas)),
                ],
                capture_output=True,
                timeout=60,
                check=False,
            )
            if created.returncode != 0:
                raise ClusterUnavailable(
                    f"redis-cli --cluster create failed: {created.stdout[-500:]!r} "
                    f"{created.stderr[-500:]!r}"
                )
            cluster.await_healthy(timeout=60)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, server: str, port: int) -> None:
        node_dir = self.directory / str(port)
        node_dir.mkdir(exist_ok=True)
        self.processes[port] = subprocess.Popen(
            [
                *(server, "--port", str(port), "--bind", "127.0.0.1"),
                *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                *("--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--save", ""),
                *("--appendonly", "no", "--dir", str(node_dir)),
                *("--logfile", str(node_dir / "redis.log")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def cli(self, port: int, *args: str) -> str:
        """One redis-cli command against node `port`; its output."""
        result = subprocess.run(
            ["redis-cli", "-p", str(port), *args], capture_output=True, timeout=10, check=False
        )
        return result.stdout.decode()

    def _await_ping(self, port: int, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while self.cli(port, "ping").strip() != "PONG":
            if time.monotonic() > deadline:
                raise ClusterUnavailable(f"redis-server on port {port} did not start")
            time.sleep(0.05)

    def alive(self) -> list[int]:
        return [port for port, process in self.processes.items() if process.poll() is None]

    def primaries(self) -> list[int]:
        """The ports of the live nodes that are primaries now."""
        return [port for port in self.alive() if "role:master" in self.cli(port, "info")]

    def healthy(self) -> bool:
        """Every live node sees the cluster ok, 3 primaries alive, every live replica synced."""
        for port in self.alive():
            if "cluster_state:ok" not in self.cli(port, "cluster", "info"):
                return False
            replication = self.cli(port, "info", "replication")
            if "role:slave" in replication and "master_link_status:up" not in replication:
                return False
        return True

    def await_healthy(self, timeout: float) -> float:
        """Wait until `healthy()`; the seconds it took."""
        start = time.monotonic()
        while not self.healthy():
            if time.monotonic() - start > timeout:
                raise ClusterUnavailable(f"the cluster was not healthy within {timeout} s")
            time.sleep(0.1)
        return time.monotonic() - start

    def restart(self, port: int) -> None:
        """Start node `port` again from its directory: it rejoins the cluster (as a replica
        when its slots were given to another node meanwhile)."""
        server = shutil.which("redis-server")
        assert server is not None  # it started the first time
        self._spawn(server, port)
        self._await_ping(port)

    def kill(self, port: int) -> None:
        """Kill node `port` at once (SIGKILL: no goodbye to the others)."""
        process = self.processes[port]
        process.kill()
        process.wait()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


_cluster: list[LocalCluster] = []
_failed: list[str] = []


def session_cluster() -> LocalCluster:
    """The test session's cluster, started on first use and stopped when the session ends;
    the test skips (fails under CI=true) when it cannot be started."""
    if redis is None:
        server_unavailable("Redis Cluster", "the redis package is not installed")
    if not _cluster and not _failed:
        try:
            _cluster.append(LocalCluster.start())
            atexit.register(_cluster[0].stop)
        except ClusterUnavailable as error:
            _failed.append(str(error))
    if _failed:
        server_unavailable("Redis Cluster", _failed[0])
    return _cluster[0]


def cluster_url() -> str:
    return session_cluster().url


def client() -> redis.cluster.RedisCluster:
    """A new client of the session's cluster (close it with `close_client`)."""
    return redis.cluster.RedisCluster.from_url(cluster_url())
