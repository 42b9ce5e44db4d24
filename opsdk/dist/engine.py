"""Ray Core as the engine: the one place opsdk starts or joins a Ray instance.

opsdk writes no RPC, scheduler or process manager of its own: tasks are Ray actors, values
between them are Ray calls. `connect()` with no address (and no `RAY_ADDRESS`) starts the
*embedded* instance, sized for a small machine: dashboard off, bound to loopback, a small object
store and a temp dir of its own (Ray's default under /tmp/ray is shared by every user of the
machine). Recent Ray turns token authentication on for a local instance it starts (the token is
kept under ~/.ray, or where RAY_AUTH_TOKEN_PATH points); opsdk leaves that on. With an address,
the process joins that cluster instead, after checking that the address answers at all (Ray's own
connect retries for a minute before it gives up).

A process holds one Ray connection: the first `connect()` decides which, later calls reuse it,
and asking for a different address afterwards is an error saying so.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Optional

from opsdk.registry.errors import OpsdkError

# The embedded instance's object store (bytes): Ray's default takes 30% of RAM, which on a
# small shared machine starves everything else; 80 MB is above Ray's minimum and holds the
# values of a training step many times over (large arrays spill to disk past it).
OBJECT_STORE_BYTES = 80 * 1024 * 1024
_CONNECT_CHECK_S = 3.0  # how long an address may take to accept a TCP connection

_lock = threading.Lock()


@dataclass(frozen=True)
class Engine:
    """The Ray connection of this process: the address joined ('' for the embedded instance)
    and the embedded instance's temp dir ('' when joined)."""

    address: str
    temp_dir: str


_engine: Optional[Engine] = None


def ray_module() -> Any:
    """The `ray` package, or an error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise OpsdkError("opsdk.dist needs Ray Core, which is not installed; "
                         "pip install 'opsdk[dist]'") from None
    return ray


def connect(address: Optional[str] = None, temp_dir: Optional[str] = None) -> Engine:
    """Join the Ray cluster at `address` (else `RAY_ADDRESS`), or start the embedded instance.

    Idempotent: a process connects once; a later call with another address is an error."""
    global _engine
    wanted = address if address is not None else os.environ.get("RAY_ADDRESS", "")
    with _lock:
        ray = ray_module()
        if _engine is not None and ray.is_initialized():
            if wanted and wanted != _engine.address:
                where = _engine.address or "the embedded local instance"
                raise OpsdkError(f"this process is already connected to {where}; a process "
                                 f"joins one Ray cluster, so it cannot also join {wanted}")
            return _engine
        _engine = _join(ray, wanted) if wanted else _start_embedded(ray, temp_dir)
        return _engine


def _join(ray: Any, address: str) -> Engine:
    check_answers(address)
    host, _ = _host_port(address)
    # A cluster on loopback knows its node as 127.0.0.1: the client must say it is there too,
    # or Ray looks for the node at the machine's own address and finds none.
    local = {"_node_ip_address": "127.0.0.1"} if host in ("127.0.0.1", "localhost") else {}
    try:
        ray.init(address=address, include_dashboard=False, configure_logging=False,
                 log_to_driver=True, **local)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ... by version
        raise OpsdkError(f"cannot join the Ray cluster at {address}: {exc}") from None
    return Engine(address, "")


def _start_embedded(ray: Any, temp_dir: Optional[str]) -> Engine:
    # Ray keeps Unix sockets under its temp dir, whose paths may not exceed 107 bytes: a short
    # folder directly under the system temp dir.
    folder = temp_dir or tempfile.mkdtemp(prefix="opsdk-ray-")
    ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1",
             object_store_memory=OBJECT_STORE_BYTES, _temp_dir=folder,
             configure_logging=False, log_to_driver=True)
    return Engine("", folder)


def check_answers(address: str) -> None:
    """Raise an OpsdkError unless something accepts TCP connections at `address` (host:port,
    optionally prefixed `ray://` or `ray:`)."""
    host, port = _host_port(address)
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_CHECK_S):
            return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    raise OpsdkError(f"the Ray cluster address {address} does not answer ({reason}); start a "
                     "cluster there with `ray start --head`, or give no address (and unset "
                     "RAY_ADDRESS) to run on an embedded local instance")


def _host_port(address: str) -> tuple[str, int]:
    text = address.split("://", 1)[-1]
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise OpsdkError(f"Ray cluster address {address!r}: expected host:port, "
                         "e.g. 127.0.0.1:6379")
    return host, int(port)


def connected() -> Optional[Engine]:
    """The current connection, or None."""
    return _engine


def shutdown() -> None:
    """Leave (or stop, for the embedded instance) the Ray connection of this process."""
    global _engine
    with _lock:
        if _engine is not None:
            ray_module().shutdown()
            _engine = None

