"""Storage specs: one string names any Optuna storage, and its password never gets printed.

A spec with ``://`` is an SQLAlchemy URL for Optuna's ``RDBStorage`` (``sqlite:///runs/a.db``,
``postgresql://user:secret@host/db``), or ``grpc://host:port``, Optuna's gRPC storage proxy in
front of one (``python -m lightning_hpo.proxy``: many workers, one set of database connections);
any other string is the path of a journal file, Optuna's fastest storage for one machine
(``runs/lenet.journal``), which ``optuna-dashboard`` opens too.

A proxy that requires a token, or speaks TLS, takes the token's file and the certificate in the
URL, ``grpc://host:port?token_file=~/.hpo-token&tls_ca=cert.pem``, or in the environment
(:data:`TOKEN_ENV`, :data:`TOKEN_FILE_ENV`, :data:`TLS_CA_ENV`); never the token itself, since
specs are printed and recorded (masked: ``mask`` hides a ``token=`` as it hides a password).

:class:`StorageSpec` is the one reading of a spec that every module uses: its kind, its file and
lock files, its masked text; :meth:`StorageSpec.check` looks at it without writing anything (the
launcher's ``--check`` and its checks before a study is created) and :meth:`StorageSpec.open`
opens it for use (:func:`check_storage` and :func:`open_storage` are the same for a string).

Example::

    >>> mask("postgresql://hpo:secret@db.example.com:5432/studies")
    'postgresql://hpo:***@db.example.com:5432/studies'
    >>> StorageSpec("runs/quickstart.journal").kind
    'journal'

The package holds what every process needs of a storage: the specs (``_spec``), the password
mask (``_mask``), a journal file's checks (``_journal``) and its lock (``_journal_lock``), the
cross-process study locks (``_locks``), the client of our service on the gRPC proxy
(``_proxy_client``) and its token and TLS certificate (``_proxy_auth``); the server side is
:mod:`lightning_hpo.proxy`.
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
