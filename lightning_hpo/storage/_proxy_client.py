"""The client side of lightning_hpo's service on the gRPC storage proxy.

Optuna's gRPC proxy carries Optuna's storage API and nothing else. What lightning_hpo does
beside it goes through a second service on the same server, ``lightning_hpo.Proxy``
(:mod:`lightning_hpo.proxy`), which does it on the database behind the proxy exactly as a
launcher on the database does: ``AddAndRank`` / ``Records`` (the rung records), ``Claim`` (the
oldest WAITING trial to RUNNING), ``Enqueue`` (a study's WAITING trials, all or none) and
``Lock`` (a study's ``setup``/``schedule`` lock, held while the call lasts, so a client that
dies lets go). Messages are JSON; grpc, an optional dependency (the ``grpc`` extra), is not
imported at module level.

:class:`~lightning_hpo.storage._proxy_auth.ProxyAuth` says where a client's token and CA come
from (the storage URL's ``?token_file=PATH&tls_ca=PATH``, or the environment), and
:class:`ProxyStorage` is Optuna's ``GrpcStorageProxy`` on a channel that sends them with every
call (:func:`~lightning_hpo.storage._proxy_auth.channel`).

Example (with a proxy on port 13000)::

    storage = StorageSpec("grpc://localhost:13000").open()
    client = proxy_client(storage)
    client.hello()          # {'service': 1, 'backend': 'server', ...}
    with client.lock("setup", "lenet-asha"):
        ...                 # no other launcher sets this study up meanwhile

    StorageSpec("grpc://proxy-host:13000?token_file=~/.hpo-token&tls_ca=ca.pem").open()
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import warnings
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import optuna
from optuna.storages import BaseStorage

from lightning_hpo._optuna import OptunaContractError
from lightning_hpo.errors import ConfigError
from lightning_hpo.storage._proxy_auth import (
    PROXY_OPTIONS,
    TLS_CA_ENV,
    TOKEN_ENV,
    TOKEN_FILE_ENV,
    ProxyAuth,
    channel,
    token_refused,
)

if TYPE_CHECKING:
    from optuna.storages import GrpcStorageProxy as _GrpcBase
else:
    try:
        from optuna.storages import GrpcStorageProxy as _GrpcBase
    except ImportError:  # Optuna < 4.2 has no proxy: ProxyStorage refuses to be made
        _GrpcBase = BaseStorage

__all__ = [  # the token's and the CA's names are re-exported from _proxy_auth
    "PROXY_OPTIONS", "SERVICE", "TLS_CA_ENV", "TOKEN_ENV", "TOKEN_FILE_ENV", "ProxyAuth",
    "ProxyClient", "ProxyStorage", "is_proxy", "proxy_client",
]

SERVICE = "lightning_hpo.Proxy"
PROTOCOL = 2  # bumped when a method changes or comes; hello() reports it (2: Enqueue)
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
        self._token_source = getattr(storage, "token_source", None)
        self._grpc = grpc
        self._calls = {
            name: channel.unary_unary(
                f"/{SERVICE}/{name}", request_serializer=encode, response_deserializer=decode
            )
            for name in ("Hello", "AddAndRank", "Records", "Claim", "Enqueue")
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
        if code == self._grpc.StatusCode.UNAUTHENTICATED:
            return token_refused(f"grpc://{self.address}", self._token_source)
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

    def enqueue(self, study_id: int, params: Sequence[dict[str, Any]]) -> bool:
        """Enqueue one WAITING trial per item of ``params`` on the proxy's database, in one
        transaction (``lightning_hpo._optuna.enqueue_trials``); False, with nothing written,
        when the proxy is an older lightning_hpo one without the call."""
        try:
            self._calls["Enqueue"]({"study_id": study_id, "params": list(params)})
        except self._grpc.RpcError as error:
            if error.code() == self._grpc.StatusCode.UNIMPLEMENTED:
                return False
            raise self._translate(error) from None
        return True

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


class ProxyStorage(_GrpcBase):
    """Optuna's ``GrpcStorageProxy`` on a channel with the token and TLS of a :class:`ProxyAuth`.

    The same storage as Optuna's client in every other way; it pickles the same way too: the
    token is not in its state, and is read again where it is unpickled.

    Args:
        host: the proxy's host name or address.
        port: its port.
        auth: where the token and the TLS certificate come from (default: the environment).

    Attributes:
        token_source: where the token sent came from, for messages (``"LIGHTNING_HPO_PROXY_
            TOKEN"``, ``"token_file ~/.hpo-token"``); None when none is sent. Never the token.
        tls_source: where the TLS certificate came from (``"tls_ca ca.pem"``); None: no TLS.

    Raises:
        ConfigError: ``storage: ...``, a token or certificate file that cannot be used, or an
            Optuna without the gRPC proxy (before 4.2).

    Example::

        storage = ProxyStorage(host="proxy-host", port=13000, auth=ProxyAuth(tls_ca="ca.pem"))
        storage.wait_until_serving(10.0, "grpc://proxy-host:13000?tls_ca=ca.pem")
        study = optuna.create_study(storage=storage)
    """

    def __init__(self, *, host: str, port: int, auth: ProxyAuth | None = None) -> None:
        if _GrpcBase is BaseStorage:
            raise ConfigError("storage", f"grpc://{host}:{port} needs Optuna's gRPC proxy, in "
                              "Optuna 4.2 or later: pip install -U optuna")
        self.auth = ProxyAuth() if auth is None else auth
        self.token_source: str | None = None
        self.tls_source: str | None = None
        with warnings.catch_warnings():  # the proxy is "experimental" in Optuna
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            super().__init__(host=host, port=port)

    def _setup(self) -> None:
        """Optuna's ``GrpcStorageProxy._setup`` (its channel, stub and cache), on our channel."""
        try:
            from optuna.storages._grpc.auto_generated import api_pb2_grpc
            from optuna.storages._grpc.client import GrpcClientCache
        except ImportError as error:
            raise OptunaContractError(f"Optuna's gRPC client modules are gone ({error})") from None
        token, self.token_source = self.auth.token()
        ca, self.tls_source = self.auth.ca()
        self._channel = channel(self._host, self._port, ca, token)
        self._stub = api_pb2_grpc.StorageServiceStub(self._channel)
        self._cache = GrpcClientCache(self._stub)

    def wait_server_ready(self, timeout: float | None = None) -> None:
        """Wait until the channel connects, at most ``timeout`` seconds (Optuna's method, on
        this channel: Optuna's own makes a plain one).

        Raises:
            ConnectionError: not connected within ``timeout``.
        """
        import grpc

        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError as error:
            raise ConnectionError("GRPC connection timeout") from error

    def wait_until_serving(self, timeout: float, name: str) -> None:
        """Return once the proxy answers a call; wait up to ``timeout`` seconds for one that
        does not answer yet.

        A call to lightning_hpo's ``Hello`` tells at once what a connection alone does not: a
        token refused, a TLS handshake that failed, a TLS proxy spoken to in plain text. A
        plain Optuna proxy (no ``Hello``) answers too; :class:`ProxyClient` says what it lacks.

        Args:
            timeout: seconds to wait for a proxy that is not listening yet.
            name: the storage as printed in messages (masked).

        Raises:
            ConfigError: ``storage: ...`` in one line: the token is missing or wrong (see
                :func:`token_refused`), or TLS does not match the proxy's.
            ConnectionError: nothing answered within ``timeout``.
        """
        import grpc

        hello = self._channel.unary_unary(
            f"/{SERVICE}/Hello", request_serializer=encode, response_deserializer=decode
        )
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                hello({}, timeout=max(left, 1.0))  # no wait_for_ready: a failure says why
                return
            except grpc.RpcError as error:
                code, details = error.code(), " ".join(str(error.details() or "").split())
            if code == grpc.StatusCode.UNAUTHENTICATED:
                raise token_refused(name, self.token_source)
            if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return  # it answers (UNIMPLEMENTED: a plain Optuna proxy)
            mismatch = self._tls_mismatch(name, details)
            if mismatch is not None:
                raise mismatch
            if left <= 0:
                raise ConnectionError(f"GRPC connection timeout ({details})")
            self.wait_server_ready(timeout=left)  # a proxy starting: wait for it to listen
            time.sleep(0.05)

    def _tls_mismatch(self, name: str, details: str) -> ConfigError | None:
        """The one line when ``details`` (of ``UNAVAILABLE``) say TLS does not match; else None."""
        reason = _short_reason(details)
        lowered = details.lower()
        if self.tls_source is None:
            if "socket closed" not in lowered:
                return None
            return ConfigError(
                "storage", f"cannot open {name}: the proxy closed the connection ({reason}); "
                f"a proxy started with --tls-cert needs ?tls_ca=PATH (or {TLS_CA_ENV})",
            )
        if "wrong_version_number" in lowered:
            return ConfigError(
                "storage", f"cannot open {name}: the proxy does not speak TLS (started "
                f"without --tls-cert?), but {self.tls_source} asks for it ({reason})",
            )
        if "hostname verification" in lowered:
            return ConfigError(
                "storage", f"cannot open {name}: the proxy's certificate does not name "
                f"{self._host} ({reason}); use a host name the certificate holds (its "
                "subjectAltName), or make one that holds it",
            )
        if any(word in lowered for word in ("handshake", "certificate", "verif", "ssl", "tls")):
            return ConfigError(
                "storage", f"cannot open {name}: TLS handshake failed ({reason}); "
                f"{self.tls_source} must be the proxy's --tls-cert or the CA that signed it",
            )
        return None


def _short_reason(details: str) -> str:
    """The gist of grpc's connection failure: ``CERTIFICATE_VERIFY_FAILED: self signed
    certificate`` of ``failed to connect to all addresses; last error: UNKNOWN: ipv4:...: Tls
    handshake failed (...): ...:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED: self signed
    certificate: OK``."""
    reason = details.rsplit("last error: ", 1)[-1]
    reason = reason.rsplit("OPENSSL_internal:", 1)[-1].removesuffix(": OK")
    reason = re.sub(r"^[A-Z_]+: ipv[46]:\S+?:\d+: ", "", reason)
    reason = reason.rsplit("error: ", 1)[-1]  # "... check failed with error: <why>"
    reason = re.sub(r"^(UNAUTHENTICATED|UNAVAILABLE|UNKNOWN): ", "", reason)
    return reason.rstrip(".")[:200]
