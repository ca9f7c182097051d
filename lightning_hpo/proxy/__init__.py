"""``python -m lightning_hpo.proxy STORAGE``: Optuna's gRPC storage proxy, plus lightning_hpo's.

Optuna's gRPC storage proxy (Optuna 4.2+) puts one process in front of the database, so that
many workers (``storage: grpc://host:port``) do not each hold connections. This server is
Optuna's proxy with a second service on the same port, ``lightning_hpo.Proxy``
(:mod:`lightning_hpo.proxy._service`), for what Optuna's storage API does not carry: the rung
records (the database's own table, shared with launchers on the database), the launcher's claims
of WAITING trials, and its ``setup``/``schedule`` study locks, held for as long as a launcher's
call lasts. A launcher behind a plain ``optuna.storages.run_grpc_proxy_server`` stops with
``storage: the gRPC proxy at ... has no lightning_hpo service``.

Beyond loopback the proxy requires a token (``--token-file``, a file only its owner can read) on
every call; ``--tls-cert`` and ``--tls-key`` turn TLS on (:mod:`lightning_hpo.proxy._auth`).
Clients name them in the URL (``grpc://HOST:PORT?token_file=PATH&tls_ca=CERT``) or the
environment (``LIGHTNING_HPO_PROXY_TOKEN``, ``..._TOKEN_FILE``, ``..._TLS_CA``). Behind it: an
SQLite database or a database server, not a journal file (Optuna's proxy does not serve one);
``heartbeat:`` needs the database URL, since the proxy does not carry Optuna's heartbeat.

Example::

    python -m lightning_hpo.proxy postgresql://hpo:secret@db/studies --host 0.0.0.0 --port 13000 \
        --token-file ~/.hpo-token
    # on every machine:  storage: grpc://proxy-host:13000?token_file=~/.hpo-token   in the config

    server, port = serve("sqlite:///runs/all.db", host="localhost", port=0)  # in Python
    server.stop(grace=None)
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import optuna

from lightning_hpo._optuna import OptunaContractError
from lightning_hpo.errors import ConfigError
from lightning_hpo.proxy._auth import TokenInterceptor, server_credentials, server_token
from lightning_hpo.storage import StorageSpec

__all__ = ["DEFAULT_THREADS", "serve"]

DEFAULT_THREADS = 32  # server threads: each call in progress, and each lock held, takes one


def serve(
    storage: str, *, host: str = "localhost", port: int = 13000, threads: int = DEFAULT_THREADS,
    token_file: str | Path | None = None, tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
) -> tuple[Any, int]:
    """Start the proxy for ``storage`` on ``host:port``; returns ``(server, port)``, started.

    Opens the storage (creating an SQLite database or Optuna's tables when missing), puts
    Optuna's cache in front of it as Optuna's ``run_grpc_proxy_server`` advises, and serves
    Optuna's service and lightning_hpo's on the same port. Port 0 takes a free port (the one
    returned). Stop it with ``server.stop(grace)``.

    Args:
        token_file: a file holding the token every call must carry (readable by its owner
            only); required unless ``host`` is loopback (``localhost``, ``127.0.0.1``, ``::1``).
        tls_cert: the server's certificate (PEM), for TLS; with ``tls_key``, its private key.

    Raises:
        ConfigError: ``storage`` is a journal file, in-memory SQLite or itself a proxy, cannot
            be opened, or grpc is not installed; ``port`` cannot be listened on; ``threads``
            below 2; no ``token_file`` beyond loopback, or a token or TLS file that cannot be
            used (see :mod:`lightning_hpo.proxy._auth`). Nothing is opened before these checks.
    """
    spec = StorageSpec(storage)
    if spec.kind in ("journal", "sqlite-memory", "grpc"):
        what = {"journal": "a journal file (Optuna's proxy serves RDB storages only)",
                "sqlite-memory": "in-memory SQLite (nothing would outlive the proxy)",
                "grpc": "itself a gRPC proxy"}[spec.kind]
        raise ConfigError("storage", f"{spec.masked} is {what}; serve an SQLite file "
                          "(sqlite:///FILE.db) or a database server (postgresql://...)")
    if threads < 2:
        raise ConfigError("threads", f"must be at least 2, got {threads}")
    if not 0 <= port <= 65535:
        raise ConfigError("port", f"must be in 0-65535, got {port}")
    token = server_token(token_file, host)
    try:
        import grpc
    except ImportError:
        raise ConfigError(
            "storage", "the gRPC proxy needs grpcio: pip install 'lightning-async-hpo[grpc]'"
        ) from None
    try:
        from optuna.storages._grpc.auto_generated import api_pb2_grpc
        from optuna.storages._grpc.servicer import OptunaStorageProxyService
    except ImportError as error:
        raise OptunaContractError(f"Optuna's gRPC proxy modules are gone ({error})") from None
    from lightning_hpo.proxy._service import ProxyService

    credentials = server_credentials(tls_cert, tls_key)
    cached = optuna.storages.get_storage(spec.open())  # RDBStorage -> Optuna's cache around it
    server = grpc.server(
        ThreadPoolExecutor(max_workers=threads, thread_name_prefix="proxy"),
        interceptors=[TokenInterceptor(token)] if token is not None else None,  # both services
        options=[("grpc.so_reuseport", 0)],  # a second proxy on a port in use fails, not shares
    )
    with warnings.catch_warnings():  # the proxy is "experimental" in Optuna
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        api_pb2_grpc.add_StorageServiceServicer_to_server(
            OptunaStorageProxyService(cached), server
        )
    server.add_generic_rpc_handlers((ProxyService(spec, cached).handler(),))
    try:
        bare = host.strip("[]")
        address = f"[{bare}]:{port}" if ":" in bare else f"{bare}:{port}"  # IPv6: [::]:13000
        if credentials is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, credentials)
    except RuntimeError as error:
        raise ConfigError("port", f"cannot listen on {host}:{port} ({error})") from None
    if bound == 0:  # older grpc returns 0 instead of raising
        raise ConfigError("port", f"cannot listen on {host}:{port} (in use?)")
    server.start()
    return server, bound
