"""Who may call the proxy, server side: its token and its TLS certificate.

A proxy listening beyond its own machine (``--host 0.0.0.0``) serves whoever reaches its port:
on a cluster, every user of every node, who could read, change or delete every study behind
it. Such a proxy requires a token, read from a file only its owner can read (``--token-file``);
every call on the port, Optuna's service and lightning_hpo's alike, must carry it as gRPC
metadata (``authorization: Bearer TOKEN``, :data:`~lightning_hpo.storage._proxy_auth.
TOKEN_HEADER`) or is refused with ``UNAUTHENTICATED``. On loopback (``localhost``,
``127.0.0.0/8``, ``::1``) the token is optional. TLS (``--tls-cert`` and ``--tls-key``, PEM
files) encrypts the calls, the token with them: without it the token crosses the network in
clear text, which stops other users of the cluster but not one who can read its traffic.

The client side (where the token and CA come from) is
:mod:`lightning_hpo.storage._proxy_auth`.

Example::

    >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0"), is_loopback("[::1]")
    (True, False, True)
    >>> server_token(None, "localhost") is None  # loopback: no token required
    True
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightning_hpo.errors import ConfigError
from lightning_hpo.storage import TOKEN_HEADER, check_private, read_token_file

__all__ = ["MIN_TOKEN_LENGTH", "TokenInterceptor", "is_loopback", "server_credentials",
           "server_token"]

_logger = logging.getLogger(__name__)

#: Characters a proxy's token has at least (``openssl rand -hex 32`` gives 64).
MIN_TOKEN_LENGTH = 16
_LOOPBACK_NAMES = ("localhost", "ip6-localhost", "ip6-loopback")
_MAX_PEERS_LOGGED = 1000  # peers whose first refusal is logged; later ones are not


def is_loopback(host: str) -> bool:
    """Whether a server listening on ``host`` is reachable from this machine only:
    ``localhost``, an address in ``127.0.0.0/8`` or ``::1``. Any other name is taken to reach
    beyond it (a name is not resolved: it could resolve elsewhere tomorrow).

    Example::

        >>> is_loopback("localhost"), is_loopback("127.0.0.2"), is_loopback("node07")
        (True, True, False)
    """
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:  # a host name
        return False


def server_token(token_file: str | Path | None, host: str) -> str | None:
    """The token a proxy listening on ``host`` requires, read from ``token_file``.

    Args:
        token_file: a file holding the token, readable by its owner only (``chmod 600``); one
            line of at least 16 printable ASCII characters (``openssl rand -hex 32``).
        host: the address the proxy listens on.

    Returns:
        The token; None when ``token_file`` is None and ``host`` is loopback (no token).

    Raises:
        ConfigError: ``token_file: ...``: none given for a host beyond loopback, or the file is
            missing, open to other users, empty or holds too short a token. Never the token.

    Example::

        >>> server_token(None, "0.0.0.0")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        lightning_hpo.errors.ConfigError: token_file: listening on 0.0.0.0 lets ...
    """
    if token_file is None:
        if is_loopback(host):
            return None
        raise ConfigError(
            "token_file", f"listening on {host} lets anyone who reaches the port read, change "
            "and delete every study behind the proxy: give --token-file PATH, a file only you "
            "can read (make one: (umask 077; openssl rand -hex 32 > PATH)), or listen on "
            "localhost",
        )
    token = read_token_file(token_file, field="token_file", name="token file")
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            "token_file", f"the token in {Path(token_file).expanduser()} has {len(token)} "
            f"characters; use at least {MIN_TOKEN_LENGTH} (e.g. openssl rand -hex 32)",
        )
    return token


def server_credentials(tls_cert: str | Path | None, tls_key: str | Path | None) -> Any:
    """grpc's server credentials for TLS with a certificate and its private key (PEM files);
    None when neither is given (a plain port).

    The key file must be readable by its owner only, as the token file. The pair is loaded
    once with Python's ``ssl`` first: grpc would only say that it cannot listen on the port.

    Raises:
        ConfigError: ``tls_cert: ...`` or ``tls_key: ...``: one given without the other, a
            file that cannot be read, open to other users (the key), or not PEM; a key that is
            not the certificate's.
    """
    if tls_cert is None and tls_key is None:
        return None
    if tls_cert is None or tls_key is None:
        missing = "tls_cert" if tls_cert is None else "tls_key"
        raise ConfigError(missing, "--tls-cert and --tls-key go together: give both (the "
                          "certificate and its private key, PEM files)")
    cert = _read_pem(Path(tls_cert).expanduser(), "tls_cert", b"CERTIFICATE", private=False)
    key = _read_pem(Path(tls_key).expanduser(), "tls_key", b"PRIVATE KEY", private=True)
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(
            Path(tls_cert).expanduser(), Path(tls_key).expanduser()
        )
    except ssl.SSLError as error:
        reason = " ".join(str(error).split())[:200]
        raise ConfigError("tls_key", f"{tls_key} is not the private key of {tls_cert}, or "
                          f"one of them does not parse ({reason})") from None
    import grpc

    return grpc.ssl_server_credentials([(key, cert)])


def _read_pem(path: Path, field: str, label: bytes, *, private: bool) -> bytes:
    """A PEM file's bytes, once it holds a ``-----BEGIN ...<label>-----`` block (and, when
    ``private``, is readable by its owner only)."""
    try:
        if private:
            check_private(path, path.stat().st_mode, field=field, name="key file")
        data = path.read_bytes()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConfigError(field, f"cannot read {path} ({reason})") from None
    if b"-----BEGIN " not in data or label + b"-----" not in data:
        what = label.decode().lower()
        raise ConfigError(field, f"{path} is not a PEM {what} (no '-----BEGIN ...' "
                          f"{what} block)")
    return data


class TokenInterceptor:
    """A grpc server interceptor: a call without the proxy's token is refused.

    Every call on the port goes through it, whatever its service: one whose metadata holds
    ``authorization: Bearer <token>`` goes on; any other ends with ``UNAUTHENTICATED`` before
    its request is read, and the first refusal of each peer address is logged (a warning
    naming the peer, never a token). Tokens are compared in constant time.

    Args:
        token: the token calls must carry.

    Example::

        server = grpc.server(executor, interceptors=[TokenInterceptor(token)])
    """

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "TokenInterceptor(<token>)"

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        """The call's handler when its metadata holds the token; else one that refuses it."""
        sent = _sent_token(details.invocation_metadata)
        if sent is not None and hmac.compare_digest(sent, self._expected):
            return continuation(details)
        why = "no token was sent" if sent is None else "the token sent is not this proxy's"
        return self._refusal(continuation(details), why)

    def _refusal(self, handler: Any, why: str) -> Any:
        """A handler of ``handler``'s shape (unary or streaming, either way) that ends the call
        with ``UNAUTHENTICATED``; unary-unary for a method that does not exist."""
        import grpc

        def refuse(request: Any, context: Any) -> Any:
            self._log(context.peer(), why)
            context.abort(grpc.StatusCode.UNAUTHENTICATED, f"lightning_hpo proxy: {why}")

        streams = (bool(handler and handler.request_streaming),
                   bool(handler and handler.response_streaming))
        make = {
            (False, False): grpc.unary_unary_rpc_method_handler,
            (False, True): grpc.unary_stream_rpc_method_handler,
            (True, False): grpc.stream_unary_rpc_method_handler,
            (True, True): grpc.stream_stream_rpc_method_handler,
        }[streams]
        return make(refuse)  # no deserializer: the request is never decoded

    def _log(self, peer: str, why: str) -> None:
        """Log the first refusal of a peer's address (``ipv4:10.0.0.7:52114`` -> its host)."""
        address = peer.rsplit(":", 1)[0]
        with self._lock:
            first = address not in self._logged and len(self._logged) < _MAX_PEERS_LOGGED
            if first:
                self._logged.add(address)
        if first:
            _logger.warning("refused a call from %s: %s (later refusals from it are not "
                            "logged)", address, why)


def _sent_token(metadata: Any) -> bytes | None:
    """The value of the call's ``authorization`` metadata, as bytes; None when absent."""
    for key, value in metadata or ():
        if key == TOKEN_HEADER:
            return value.encode() if isinstance(value, str) else bytes(value)
    return None
