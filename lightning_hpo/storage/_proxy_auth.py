"""Who a proxy client is, client side: its token and the TLS certificate it trusts.

A proxy reachable beyond its own machine requires a token (``--token-file`` on the server,
:mod:`lightning_hpo.proxy._auth`), and may speak TLS (``--tls-cert``/``--tls-key``).
:class:`ProxyAuth` says where a client's token and CA come from: ``?token_file=PATH&tls_ca=PATH``
in the storage URL, or the environment (:data:`TOKEN_ENV`, :data:`TOKEN_FILE_ENV`,
:data:`TLS_CA_ENV`). :func:`channel` is a grpc channel that sends the token with every call as
gRPC metadata (``authorization: Bearer TOKEN``). The token is read when the channel is made and
kept only inside it: never in a URL, a message, a log or a pickled storage.

Example::

    >>> ProxyAuth(token_file="~/.hpo-token").token_file
    '~/.hpo-token'
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from lightning_hpo.errors import ConfigError

__all__ = [
    "PROXY_OPTIONS", "TLS_CA_ENV", "TOKEN_ENV", "TOKEN_FILE_ENV", "TOKEN_HEADER", "ProxyAuth",
    "channel", "check_private", "read_token_file", "token_refused",
]

#: The token itself, for clients (the launcher's workers inherit it).
TOKEN_ENV = "LIGHTNING_HPO_PROXY_TOKEN"
#: A file holding the token (readable by its owner only), for clients.
TOKEN_FILE_ENV = "LIGHTNING_HPO_PROXY_TOKEN_FILE"
#: The certificate (PEM) that a TLS proxy's certificate is checked against, for clients.
TLS_CA_ENV = "LIGHTNING_HPO_PROXY_TLS_CA"
#: The gRPC metadata key of the token; its value is ``Bearer <token>``.
TOKEN_HEADER = "authorization"
#: The options a ``grpc://`` URL may carry, each a file path: ``?token_file=PATH&tls_ca=PATH``.
PROXY_OPTIONS = ("token_file", "tls_ca")
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1)]  # as Optuna's own channel
_MAX_TOKEN_FILE = 4096  # bytes: a token file longer than this is not a token file



def read_token_file(path: str | Path, *, field: str, name: str) -> str:
    """The token in the file at ``path``: its one line, without surrounding whitespace.

    The file must be readable by its owner only, like an ssh key (``chmod 600 PATH``), and hold
    one line of printable ASCII without spaces (``openssl rand -hex 32`` makes one).

    Args:
        path: the file (``~`` is expanded).
        field: the field errors name (``storage`` on a client, ``token_file`` on the proxy).
        name: what messages call the path (``token_file``, an environment variable).

    Raises:
        ConfigError: the file is missing, unreadable, open to other users, empty, or not one
            line of printable ASCII. The message never holds the file's content.

    Example::

        >>> read_token_file("/no/such/file", field="storage", name="token_file")
        Traceback (most recent call last):
        ...
        lightning_hpo.errors.ConfigError: storage: cannot read token_file /no/such/file (No ...)
    """
    file = Path(path).expanduser()
    try:
        mode = file.stat().st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(field, f"{name} {file} is not a file")
        check_private(file, mode, field=field, name=name)
        with file.open("rb") as handle:
            data = handle.read(_MAX_TOKEN_FILE + 1)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConfigError(field, f"cannot read {name} {file} ({reason})") from None
    if len(data) > _MAX_TOKEN_FILE:
        raise ConfigError(field, f"{name} {file} is longer than {_MAX_TOKEN_FILE} bytes: "
                          "not a token file")
    if not data.strip():
        raise ConfigError(field, f"{name} {file} is empty: put a token in it, e.g. "
                          f"(umask 077; openssl rand -hex 32 > {file})")
    return _checked_token(data, field=field, where=f"{name} {file}")


def check_private(path: Path, mode: int, *, field: str, name: str) -> None:
    """Refuse a secret's file that users other than its owner may read or write (``mode``: its
    ``st_mode``). Not checked on Windows, whose permissions are not mode bits.

    Raises:
        ConfigError: ``<field>: <name> PATH is open to other users (mode 0644): chmod 600 PATH``.
    """
    if os.name != "nt" and mode & 0o077:
        raise ConfigError(field, f"{name} {path} is open to other users (mode "
                          f"{stat.S_IMODE(mode):04o}): chmod 600 {path}")


def _checked_token(data: bytes, *, field: str, where: str) -> str:
    """``data`` stripped, once it is one line of printable ASCII without spaces (what gRPC
    metadata carries); the error names ``where`` the token came from, never the token."""
    token = data.strip()
    if not token:
        raise ConfigError(field, f"{where} holds no token")
    if any(not 0x21 <= byte <= 0x7E for byte in token):
        raise ConfigError(field, f"{where} must hold one line of printable ASCII without "
                          "spaces (e.g. from `openssl rand -hex 32`)")
    return token.decode("ascii")


def token_refused(name: str, source: str | None) -> ConfigError:
    """The one line for a call that the proxy refused (``UNAUTHENTICATED``).

    Args:
        name: the storage as printed (``grpc://host:port``, masked).
        source: where the token sent came from (:attr:`ProxyStorage.token_source`), or None
            when none was sent.

    Example::

        >>> print(token_refused("grpc://h:13000", None))  # doctest: +ELLIPSIS
        storage: grpc://h:13000 requires a token and none was given (UNAUTHENTICATED): set ...
    """
    if source is None:
        return ConfigError(
            "storage", f"{name} requires a token and none was given (UNAUTHENTICATED): set "
            f"{TOKEN_ENV} or {TOKEN_FILE_ENV}, or add ?token_file=PATH to the storage URL (the "
            "token in the proxy's --token-file)",
        )
    return ConfigError(
        "storage", f"{name} refused the token from {source} (UNAUTHENTICATED): it must be the "
        "token in the proxy's --token-file",
    )


@dataclass(frozen=True)
class ProxyAuth:
    """Where a client's token and TLS certificate come from; it holds no token itself.

    Attributes:
        token_file: ``?token_file=`` of the storage URL, a file holding the token (readable by
            its owner only). Without it the token is :data:`TOKEN_ENV`, else the one in the
            file :data:`TOKEN_FILE_ENV` names, else none is sent.
        tls_ca: ``?tls_ca=`` of the storage URL, the PEM certificate the proxy's must be (a
            self-signed one) or be signed by; it turns TLS on. Without it :data:`TLS_CA_ENV`,
            else the channel is plain.

    Example::

        >>> ProxyAuth().token({})
        (None, None)
        >>> ProxyAuth().token({"LIGHTNING_HPO_PROXY_TOKEN": "c0ffee"})
        ('c0ffee', 'LIGHTNING_HPO_PROXY_TOKEN')
    """

    token_file: str | None = None
    tls_ca: str | None = None

    def token(self, environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
        """``(token, where it came from)``, read now; ``(None, None)`` when none is given.

        Raises:
            ConfigError: ``storage: ...``, a token file that cannot be used or a token that is
                not one line of printable ASCII.
        """
        env = os.environ if environ is None else environ
        if self.token_file:
            token = read_token_file(self.token_file, field="storage", name="token_file")
            return token, f"token_file {self.token_file}"
        if env.get(TOKEN_ENV):
            return _checked_token(env[TOKEN_ENV].encode(), field="storage", where=TOKEN_ENV), \
                TOKEN_ENV
        if env.get(TOKEN_FILE_ENV):
            path = env[TOKEN_FILE_ENV]
            token = read_token_file(path, field="storage", name=TOKEN_FILE_ENV)
            return token, f"{TOKEN_FILE_ENV} {path}"
        return None, None

    def ca(self, environ: Mapping[str, str] | None = None) -> tuple[bytes | None, str | None]:
        """``(PEM certificate, where it came from)``; ``(None, None)``: no TLS.

        Raises:
            ConfigError: ``storage: ...``, the file cannot be read or holds no certificate.
        """
        env = os.environ if environ is None else environ
        name, path = ("tls_ca", self.tls_ca) if self.tls_ca else (TLS_CA_ENV, env.get(TLS_CA_ENV))
        if not path:
            return None, None
        file = Path(path).expanduser()
        try:
            pem = file.read_bytes()
        except OSError as error:
            reason = error.strerror or type(error).__name__
            raise ConfigError("storage", f"cannot read {name} {file} ({reason})") from None
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            raise ConfigError("storage", f"{name} {file} is not a PEM certificate (no "
                              "'-----BEGIN CERTIFICATE-----' line)")
        return pem, f"{name} {path}"


def channel(host: str, port: int, ca: bytes | None, token: str | None) -> Any:
    """A grpc channel to ``host:port``: TLS checked against ``ca`` when given, and ``token`` in
    every call's metadata when given."""
    import grpc

    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # an IPv6 address
    if ca is None:
        channel = grpc.insecure_channel(target, options=_CHANNEL_OPTIONS)
    else:
        credentials = grpc.ssl_channel_credentials(root_certificates=ca)
        channel = grpc.secure_channel(target, credentials, options=_CHANNEL_OPTIONS)
    if token is None:
        return channel
    for kind in (grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                 grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
        kind.register(_TokenInterceptor)  # a virtual subclass: grpc checks isinstance only
    return grpc.intercept_channel(channel, _TokenInterceptor(token))


class _CallDetails(NamedTuple):
    """A call's details, as ``grpc.ClientCallDetails`` has them (grpc reads the attributes)."""

    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


class _TokenInterceptor:
    """A grpc client interceptor of every kind of call that adds the token to its metadata."""

    def __init__(self, token: str) -> None:
        self._metadata = ((TOKEN_HEADER, f"Bearer {token}"),)

    def __repr__(self) -> str:
        return "_TokenInterceptor(<token>)"

    def intercept(self, continuation: Any, details: Any, request: Any) -> Any:
        """Call on with the token added to ``details.metadata`` (``request``: the request, or
        its iterator for a client stream)."""
        metadata = (*tuple(details.metadata or ()), *self._metadata)
        return continuation(_CallDetails(details.method, details.timeout, metadata,
                                         details.credentials, details.wait_for_ready,
                                         details.compression), request)

    intercept_unary_unary = intercept_unary_stream = intercept
    intercept_stream_unary = intercept_stream_stream = intercept
