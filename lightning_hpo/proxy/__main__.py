"""``python -m lightning_hpo.proxy STORAGE [--host H] [--port P]``: serve a storage over gRPC.

Examples::

    python -m lightning_hpo.proxy sqlite:///runs/all.db                 # localhost:13000
    python -m lightning_hpo.proxy postgresql://hpo:secret@db/studies --host 0.0.0.0

Then ``storage: grpc://HOST:PORT`` in the configs (or ``--set storage=grpc://HOST:PORT``). It
prints one line when it listens and serves until Ctrl-C or SIGTERM. Bad input prints one line
naming the field and exits with code 2.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

from lightning_hpo.errors import EXIT_BAD_INPUT, ConfigError
from lightning_hpo.proxy import DEFAULT_THREADS, serve
from lightning_hpo.storage import DEFAULT_PROXY_PORT, mask, mask_text

_GRACE = 5.0  # seconds calls in progress get to finish at shutdown


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lightning_hpo.proxy",
        description="Optuna's gRPC storage proxy in front of one storage, with lightning_hpo's "
        "service on the same port (ASHA rung records, launcher claims and locks). Workers then "
        "use storage: grpc://HOST:PORT and only this process holds database connections.",
        epilog="example: python -m lightning_hpo.proxy postgresql://hpo:secret@db/studies "
        "--host 0.0.0.0 --port 13000",
    )
    parser.add_argument("storage", help="an SQLite database (sqlite:///FILE.db) or a database "
                        "server URL (postgresql://...); not a journal file")
    parser.add_argument("--host", default="localhost",
                        help="address to listen on (default: localhost; 0.0.0.0 for every "
                        "interface, so that other machines reach it)")
    parser.add_argument("--port", type=int, default=DEFAULT_PROXY_PORT,
                        help=f"port (default: {DEFAULT_PROXY_PORT}; 0 takes a free one)")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                        help="server threads: calls served at once, locks held included "
                        f"(default: {DEFAULT_THREADS})")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the proxy until interrupted; returns the process exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        server, port = serve(args.storage, host=args.host, port=args.port, threads=args.threads)
    except ConfigError as error:
        message = " ".join(mask_text(str(error), args.storage).split())
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"proxy for {mask(args.storage)} listening on grpc://{args.host}:{port}", flush=True)
    stop.wait()
    server.stop(grace=_GRACE).wait()
    print("proxy stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
