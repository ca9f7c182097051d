"""lightning_hpo's service on the gRPC proxy: rung records, claims and study locks, done on the
database behind the proxy the way a launcher on the database does them.

Every handler takes a JSON request and returns a JSON reply (``_proxy_client`` is the client).
A failure is a gRPC status with a one-line message: ``NOT_FOUND`` for an unknown study,
``INVALID_ARGUMENT`` for a malformed request, ``INTERNAL`` for anything else (its message masks
the storage's password).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from optuna.storages import BaseStorage, RDBStorage

from lightning_hpo._optuna import claim_waiting_trial_id, enqueue_trials, unwrap_storage
from lightning_hpo.pruners import rung_store_of
from lightning_hpo.storage import (
    LOCKING_DIALECTS,
    PROTOCOL,
    SERVICE,
    StorageSpec,
    decode,
    encode,
    file_lock,
    lock_key,
    mask_text,
    sql_lock,
)

__all__ = ["ProxyService"]

_logger = logging.getLogger(__name__)

LOCK_PURPOSES = ("setup", "schedule")


class ProxyService:
    """The handlers of ``lightning_hpo.Proxy`` for one storage.

    Args:
        spec: the storage's spec (which lock files sit beside an SQLite database).
        storage: the storage Optuna's half of the proxy serves (an ``RDBStorage``, maybe in
            Optuna's cache).
    """

    def __init__(self, spec: StorageSpec, storage: BaseStorage) -> None:
        self._spec = spec
        self._storage = storage
        self._backend = unwrap_storage(storage)  # the rung store's: the RDBStorage, uncached
        self._engine = self._backend.engine if isinstance(self._backend, RDBStorage) else None

    def handler(self) -> Any:
        """The service as a grpc generic handler, for ``server.add_generic_rpc_handlers``."""
        import grpc

        def unary(method: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
            return grpc.unary_unary_rpc_method_handler(
                self._guard(method), request_deserializer=decode, response_serializer=encode
            )

        return grpc.method_handlers_generic_handler(SERVICE, {
            "Hello": unary(self.hello),
            "AddAndRank": unary(self.add_and_rank),
            "Records": unary(self.records),
            "Claim": unary(self.claim),
            "Enqueue": unary(self.enqueue),
            "Lock": grpc.unary_stream_rpc_method_handler(
                self.lock, request_deserializer=decode, response_serializer=encode
            ),
        })

    def _guard(self, method: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
        """``method(request)`` as a grpc handler: exceptions become one-line statuses."""
        import grpc

        def handle(request: dict[str, Any], context: Any) -> dict[str, Any]:
            try:
                return method(request)
            except KeyError as error:  # Optuna's "no such study/trial"
                context.abort(grpc.StatusCode.NOT_FOUND, self._line(error))
            except (TypeError, ValueError) as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, self._line(error))
            except Exception as error:  # reported to the caller; the server goes on
                _logger.exception("%s failed", method.__name__)
                context.abort(grpc.StatusCode.INTERNAL, self._line(error))
            raise AssertionError("unreachable")  # context.abort raises

        return handle

    def _line(self, error: BaseException) -> str:
        text = " ".join(str(error).split())[:300] or type(error).__name__
        return mask_text(f"{type(error).__name__}: {text}", self._spec.text)

    def hello(self, request: dict[str, Any]) -> dict[str, Any]:
        """The protocol version and the kind of storage behind the proxy (no URL: no secret)."""
        from lightning_hpo import __version__

        return {"service": PROTOCOL, "backend": self._spec.kind, "version": __version__}

    def add_and_rank(self, request: dict[str, Any]) -> dict[str, Any]:
        """Record a rung value and rank it: the rung store of the database (a table)."""
        store = rung_store_of(self._backend, int(request["study_id"]))
        n, n_better = store.add_and_rank(
            int(request["bracket"]), [int(r) for r in request["rungs"]],
            int(request["trial_number"]), float(request["value"]),
            maximize=bool(request["maximize"]),
        )
        return {"n": n, "n_better": n_better}

    def records(self, request: dict[str, Any]) -> dict[str, Any]:
        """Every rung record of a study."""
        store = rung_store_of(self._backend, int(request["study_id"]))
        return {"records": [list(record) for record in store.records()]}

    def claim(self, request: dict[str, Any]) -> dict[str, Any]:
        """Claim a study's oldest WAITING trial; on SQLite under the launchers' claim lock."""
        study_id = int(request["study_id"])
        lock_path = self._spec.lock_path("claim")
        with file_lock(lock_path) if lock_path is not None else contextlib.nullcontext(True):
            return {"trial_id": claim_waiting_trial_id(self._storage, study_id)}

    def enqueue(self, request: dict[str, Any]) -> dict[str, Any]:
        """Enqueue a study's WAITING trials, one per item of ``params``, in one transaction."""
        enqueue_trials(self._storage, int(request["study_id"]), request["params"])
        return {}

    def lock(self, request: dict[str, Any], context: Any) -> Iterator[dict[str, Any]]:
        """Try once to take a study's lock; hold it until the caller ends the call.

        Replies ``{"held": true}`` and keeps the call open while it holds the lock (the caller
        cancels it to let go; a caller that dies ends it too), or ``{"held": false}`` at once
        when another holder has it (the caller tries again later: no server thread waits).
        """
        import grpc

        purpose, study = request.get("purpose"), request.get("study")
        if purpose not in LOCK_PURPOSES or not isinstance(study, str):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"Lock needs purpose in {list(LOCK_PURPOSES)} and a study name")
            return
        ended = threading.Event()
        context.add_callback(ended.set)
        with self._try_lock(str(purpose), study) as held:
            yield {"held": held}
            while held and context.is_active() and not ended.wait(1.0):
                pass

    def _try_lock(self, purpose: str, study: str) -> contextlib.AbstractContextManager[bool]:
        """The lock a launcher on this storage takes (``launch.study.study_lock``), not waiting."""
        lock_path = self._spec.lock_path(purpose)
        if lock_path is not None:
            return file_lock(lock_path, wait=False)
        if self._engine is not None and self._engine.dialect.name in LOCKING_DIALECTS:
            return sql_lock(self._engine, lock_key(purpose, study), wait=False)
        return contextlib.nullcontext(True)
