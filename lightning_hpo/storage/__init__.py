"""Storage specs: one string names any Optuna storage, and its password never gets printed.

A spec with ``://`` is an SQLAlchemy URL for Optuna's ``RDBStorage`` (``sqlite:///runs/a.db``,
``postgresql://user:secret@host/db``), or ``grpc://host:port``, Optuna's gRPC storage proxy in
front of one (``python -m lightning_hpo.proxy``); any other string is the path of a journal file
(``runs/lenet.journal``). A proxy that requires a token, or speaks TLS, takes the token's file
and the certificate in the URL (``grpc://host:port?token_file=~/.hpo-token&tls_ca=cert.pem``) or
the environment (:data:`TOKEN_ENV`, :data:`TOKEN_FILE_ENV`, :data:`TLS_CA_ENV`); never the token
itself, since specs are printed (masked by :func:`mask`).

:class:`StorageSpec` is the one reading of a spec every module uses; :meth:`StorageSpec.check`
looks at it without writing anything and :meth:`StorageSpec.open` opens it
(:func:`check_storage` and :func:`open_storage` do the same for a string). The private modules:
``_spec``, ``_mask``, ``_journal`` and ``_journal_lock`` (a journal file's checks and lock),
``_locks`` (cross-process study locks), ``_proxy_client`` and ``_proxy_auth`` (our service on the
gRPC proxy, whose server side is :mod:`lightning_hpo.proxy`).

Example::

    >>> mask("postgresql://hpo:secret@db.example.com:5432/studies")
    'postgresql://hpo:***@db.example.com:5432/studies'
    >>> StorageSpec("runs/quickstart.journal").kind
    'journal'
"""

from lightning_hpo.storage._journal_lock import break_lock_of
from lightning_hpo.storage._locks import LOCKING_DIALECTS, file_lock, lock_key, sql_lock
from lightning_hpo.storage._mask import mask, mask_text
from lightning_hpo.storage._proxy_auth import (
    TLS_CA_ENV,
    TOKEN_ENV,
    TOKEN_FILE_ENV,
    TOKEN_HEADER,
    check_private,
    read_token_file,
)
from lightning_hpo.storage._proxy_client import (
    PROTOCOL,
    SERVICE,
    ProxyClient,
    decode,
    encode,
    is_proxy,
    proxy_client,
)
from lightning_hpo.storage._spec import (
    DEFAULT_PROXY_PORT,
    StorageSpec,
    check_storage,
    open_storage,
    storage_outage,
)

__all__ = [
    "DEFAULT_PROXY_PORT",
    "LOCKING_DIALECTS",
    "PROTOCOL",
    "SERVICE",
    "TLS_CA_ENV",
    "TOKEN_ENV",
    "TOKEN_FILE_ENV",
    "TOKEN_HEADER",
    "ProxyClient",
    "StorageSpec",
    "break_lock_of",
    "check_private",
    "check_storage",
    "decode",
    "encode",
    "file_lock",
    "is_proxy",
    "lock_key",
    "mask",
    "mask_text",
    "open_storage",
    "proxy_client",
    "read_token_file",
    "sql_lock",
    "storage_outage",
]
