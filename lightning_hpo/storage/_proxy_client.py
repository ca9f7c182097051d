"""The client side of lightning_hpo's service on the gRPC storage proxy.

Optuna's gRPC proxy (``GrpcStorageProxy`` on the client, ``python -m lightning_hpo.proxy`` on
the server) carries Optuna's storage API and nothing else: no SQL engine, no lock. What
lightning_hpo does beside Optuna's API goes through a second service on the same server,
``lightning_hpo.Proxy`` (:mod:`lightning_hpo.proxy`), which does it on the database behind the
proxy exactly as a launcher opening the database directly does:

* ``AddAndRank`` / ``Records``: ASHA's rung records, in the database's own records table (so
  that launchers through the proxy and launchers on the database share them);
* ``Claim``: move the oldest WAITING trial of a study to RUNNING (serialised on SQLite);
* ``Lock``: hold a study's ``setup``/``schedule`` lock (the launcher's advisory or file lock)
  while the call lasts; a client that dies ends its call, and the lock goes with it.

Messages are JSON. No grpc import at module level: grpc is an optional dependency (the ``grpc``
extra), needed only for ``grpc://`` storages.

Example (with a proxy on port 13000)::

    storage = StorageSpec("grpc://localhost:13000").open()
    client = proxy_client(storage)
    client.hello()          # {'service': 1, 'backend': 'server', ...}
    with client.lock("setup", "lenet-asha"):
        ...                 # no other launcher sets this study up meanwhile
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from optuna.storages import BaseStorage

from lightning_hpo._optuna import OptunaContractError
from lightning_hpo.errors import ConfigError

__all__ = ["SERVICE", "ProxyClient", "is_proxy", "proxy_client"]

SERVICE = "lightning_hpo.Proxy"
PROTOCOL = 1  # bumped when a method changes; hello() reports it
_POLL_FIRST, _POLL_MAX = 0.02, 0.5  # seconds between tries of a lock another launcher holds


def encode(message: Any) -> bytes:
    """A message on the wire: JSON, UTF-8."""
    return json.dumps(message, separators=(",", ":")).encode()


def decode(data: bytes) -> Any:
    """The message of :func:`encode`'s bytes."""
    return json.loads(data)


def is_proxy(storage: BaseStorage) -> bool:
    """Whether ``storage`` is Optuna's gRPC client, ``GrpcStorageProxy``."""
    try:
        from optuna.storages import GrpcStorageProxy
    except ImportError:  # an Optuna without the proxy: no storage can be one
        return False
    return isinstance(storage, GrpcStorageProxy)


class ProxyClient:
    """Calls to lightning_hpo's service on the proxy behind one ``GrpcStorageProxy``.

    Uses the proxy's own channel (``GrpcStorageProxy._channel``). Every method raises
    :class:`~lightning_hpo.errors.ConfigError` (``storage: ...``) when the server is a plain
    Optuna proxy without the service, and ``grpc.RpcError`` for any other failure.
    """

    def __init__(self, storage: BaseStorage) -> None:
        import grpc

        channel = getattr(storage, "_channel", None)
        if channel is None:
            raise OptunaContractError("`GrpcStorageProxy._channel` is gone")
        host, port = getattr(storage, "_host", "?"), getattr(storage, "_port", "?")
        self.address = f"{host}:{port}"
        self._grpc = grpc
        self._calls = {
            name: channel.unary_unary(
                f"/{SERVICE}/{name}", request_serializer=encode, response_deserializer=decode
            )
            for name in ("Hello", "AddAndRank", "Records", "Claim")
        }
        self._lock_call = channel.unary_stream(
            f"/{SERVICE}/Lock", request_serializer=encode, response_deserializer=decode
        )

    def _call(self, name: str, request: dict[str, Any]) -> Any:
        try:
            return self._calls[name](request)
        except self._grpc.RpcError as error:
            raise self._translate(error) from None

    def _translate(self, error: Any) -> BaseException:
        code = error.code()
        if code == self._grpc.StatusCode.UNIMPLEMENTED:
            return ConfigError(
                "storage",
                f"the gRPC proxy at {self.address} has no lightning_hpo service (a plain Optuna "
                "proxy?); ASHA, Hyperband and the launcher need it: start the proxy with "
                "`python -m lightning_hpo.proxy STORAGE --port PORT`",
            )
        if code == self._grpc.StatusCode.NOT_FOUND:
            return KeyError(error.details())
        return error  # type: ignore[no-any-return]

    def hello(self) -> dict[str, Any]:
        """What the server is: ``{"service": PROTOCOL, "backend": kind, "version": ...}``."""
        reply: dict[str, Any] = self._call("Hello", {})
        return reply

    def add_and_rank(
        self, study_id: int, bracket: int, rungs: Sequence[int], trial_number: int,
        value: float, maximize: bool,
    ) -> tuple[int, int]:
        """The rung store's ``add_and_rank``, done on the proxy's database: ``(n, n_better)``."""
        reply = self._call("AddAndRank", {
            "study_id": study_id, "bracket": bracket, "rungs": list(rungs),
            "trial_number": trial_number, "value": value, "maximize": maximize,
        })
        return int(reply["n"]), int(reply["n_better"])

    def records(self, study_id: int) -> list[tuple[int, int, int, float]]:
        """Every rung record of the study, ``(bracket, rung, trial_number, value)``."""
        reply = self._call("Records", {"study_id": study_id})
        return [(int(b), int(r), int(t), float(v)) for b, r, t, v in reply["records"]]

    def claim(self, study_id: int) -> int | None:
        """Claim the study's oldest WAITING trial (WAITING -> RUNNING); its trial id, or None."""
        reply = self._call("Claim", {"study_id": study_id})
        trial_id = reply["trial_id"]
        return None if trial_id is None else int(trial_id)

    @contextlib.contextmanager
    def lock(self, purpose: str, study: str) -> Iterator[None]:
        """Hold the study's ``purpose`` lock on the proxy's database for the ``with`` block.

        Tries again (20 ms, then up to 0.5 s apart) while another launcher holds it.
        """
        pause = _POLL_FIRST
        while True:
            call = self._lock_call({"purpose": purpose, "study": study})
            try:
                held = next(call)["held"]
            except self._grpc.RpcError as error:
                raise self._translate(error) from None
            if held:
                break
            call.cancel()
            time.sleep(pause)
            pause = min(2 * pause, _POLL_MAX)
        try:
            yield
        finally:
            call.cancel()  # ends the call: the server lets the lock go


_clients: weakref.WeakKeyDictionary[BaseStorage, ProxyClient] = weakref.WeakKeyDictionary()
_clients_lock = threading.Lock()


def proxy_client(storage: BaseStorage) -> ProxyClient:
    """The :class:`ProxyClient` of a ``GrpcStorageProxy`` (one per storage object)."""
    with _clients_lock:
        client = _clients.get(storage)
        if client is None:
            client = _clients[storage] = ProxyClient(storage)
        return client
