"""``python -m lightning_hpo.proxy STORAGE [--host H] [--port P] [--token-file F]``: serve a
storage over gRPC.

Examples::

    python -m lightning_hpo.proxy sqlite:///runs/all.db                 # localhost:13000
    (umask 077; openssl rand -hex 32 > ~/.hpo-token)
    python -m lightning_hpo.proxy postgresql://hpo:secret@db/studies --host 0.0.0.0 \
        --token-file ~/.hpo-token [--tls-cert cert.pem --tls-key key.pem]

Then ``storage: grpc://HOST:PORT`` in the configs (or ``--set storage=grpc://HOST:PORT``), with
``?token_file=~/.hpo-token`` (or ``LIGHTNING_HPO_PROXY_TOKEN``) for a proxy with a token and
``tls_ca=cert.pem`` for one with TLS. Beyond loopback a token file is required. It prints one
line when it listens (whether a token and TLS are on; never the token) and serves until Ctrl-C
or SIGTERM. Bad input prints one line naming the field and exits with code 2.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType

from lightning_hpo._cli import OneLineParser
from lightning_hpo.errors import EXIT_BAD_INPUT, ConfigError
from lightning_hpo.proxy import DEFAULT_THREADS, serve
from lightning_hpo.storage import DEFAULT_PROXY_PORT, mask, mask_text

_GRACE = 5.0  # seconds calls in progress get to finish at shutdown


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m lightning_hpo.proxy",
        description="Optuna's gRPC storage proxy in front of one storage, with lightning_hpo's "
        "service on the same port (ASHA rung records, launcher claims and locks). Workers then "
        "use storage: grpc://HOST:PORT and only this process holds database connections.",
        epilog="example: python -m lightning_hpo.proxy postgresql://hpo:secret@db/studies "
        "--host 0.0.0.0 --port 13000 --token-file ~/.hpo-token   (make the token once: "
        "(umask 077; openssl rand -hex 32 > ~/.hpo-token); clients: storage: "
        "grpc://HOST:13000?token_file=~/.hpo-token, or the token in LIGHTNING_HPO_PROXY_TOKEN)",
    )
    parser.add_argument("storage", help="an SQLite database (sqlite:///FILE.db) or a database "
                        "server URL (postgresql://...); not a journal file")
    parser.add_argument("--host", default="localhost",
                        help="address to listen on (default: localhost; 0.0.0.0 for every "
                        "interface, so that other machines reach it: needs --token-file)")
    parser.add_argument("--port", type=int, default=DEFAULT_PROXY_PORT,
                        help=f"port (default: {DEFAULT_PROXY_PORT}; 0 takes a free one)")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                        help="server threads: calls served at once, locks held included "
                        f"(default: {DEFAULT_THREADS})")
    parser.add_argument("--token-file", metavar="PATH",
                        help="a file only you can read (chmod 600) holding the token every call "
                        "must carry, one line of at least 16 characters; required unless the "
                        "host is localhost/127.0.0.1/::1")
    parser.add_argument("--tls-cert", metavar="CERT",
                        help="the server's TLS certificate (PEM); clients add ?tls_ca=CERT (or "
                        "the CA that signed it) to the URL")
    parser.add_argument("--tls-key", metavar="KEY",
                        help="the certificate's private key (PEM, readable by you only)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the proxy until interrupted; returns the process exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        server, port = serve(args.storage, host=args.host, port=args.port, threads=args.threads,
                             token_file=args.token_file, tls_cert=args.tls_cert,
                             tls_key=args.tls_key)
    except ConfigError as error:
        message = " ".join(mask_text(str(error), args.storage).split())
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    guard = (f"token {'required' if args.token_file else 'off'}, "
             f"TLS {'on' if args.tls_cert else 'off'}")
    print(f"proxy for {mask(args.storage)} ({guard}) listening on grpc://{args.host}:{port}",
          flush=True)
    stop.wait()
    server.stop(grace=_GRACE).wait()
    print("proxy stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
