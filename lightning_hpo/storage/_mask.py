"""The password mask: a storage spec, or any text that quotes one (a driver's error message),
with every URL password and secret query option replaced by ``***``.

Example::

    >>> mask("postgresql://hpo:secret@db.example.com:5432/studies?sslpassword=key")
    'postgresql://hpo:***@db.example.com:5432/studies?sslpassword=***'
"""

from __future__ import annotations

import re

__all__ = ["mask", "mask_text"]

# A URL's password: everything between ``user:`` and the last ``@`` before the host (a password
# written unencoded may hold ``@`` or a space).
_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)"
                       r"(?P<secret>[^/?#]*?)(?=@[^@/?#\s]*(?:[/?#\s]|$))")
# A secret in a URL's query: a proxy's token (refused in a grpc:// spec), a database driver's
# password options (libpq's password and sslpassword); masked wherever one is printed.
_TOKEN = re.compile(r"(?P<head>[?&](?:token|password|sslpassword|passwd|pwd)=)"
                    r"(?P<secret>[^&#\s]*)", re.IGNORECASE)
# The same in free text (an error message), where the URL is followed by more words: the secret
# ends at a space, and punctuation that closes a clause before one (``...?password=***: no
# SQLite database at ...``) is the text's, not the secret's.
_TOKEN_IN_TEXT = re.compile(r"(?P<head>[?&](?:token|password|sslpassword|passwd|pwd)=)"
                            r"(?P<secret>[^&#\s]*?)(?=[:;,.!?)\]}'\"]*(?:[&#\s]|$))",
                            re.IGNORECASE)


def mask(spec: str) -> str:
    """The spec with any password (or ``token=`` in its query) replaced by ``***``; safe to
    print or log."""
    return _TOKEN.sub(r"\g<head>***", _PASSWORD.sub(r"\g<head>***", spec))


def mask_text(text: str, spec: str) -> str:
    """Mask ``spec``'s password wherever it appears in ``text`` (e.g. a driver's error message),
    and any other URL password or ``token=`` in it; the words around each are kept.

    Example::

        >>> spec = "sqlite:///runs/x.db?password=s3cretpw"
        >>> mask_text(f"cannot open {spec}: no SQLite database at runs/x.db", spec)
        'cannot open sqlite:///runs/x.db?password=***: no SQLite database at runs/x.db'
    """
    found = [*_PASSWORD.finditer(spec), *_TOKEN.finditer(spec)]
    secrets = sorted({match.group("secret") for match in found if match.group("secret")},
                     key=len, reverse=True)
    for secret in secrets:  # the spec's own first, whole: it may end in punctuation
        text = text.replace(secret, "***")
        # A password with an unencoded @ is cut there by the URL's parser, which takes the rest
        # for the host: a driver's "could not translate host name "sswordy@127.0.0.1"".
        for piece in re.split(r"[@:]", secret)[1:]:
            if piece:
                text = re.sub(rf"{re.escape(piece)}(?=@)", "***", text)
    return _TOKEN_IN_TEXT.sub(r"\g<head>***", _PASSWORD.sub(r"\g<head>***", text))
