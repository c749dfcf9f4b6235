"""Host credentials: make a secret, keep only its hash, check one in constant time.

Pure module: no I/O. A credential is 256 random bits, so SHA-256 of it is
enough: a slow KDF (scrypt, argon2) protects *guessable* secrets against
offline guessing, and nobody can guess 2**256 possibilities however fast the
hash is. The hash is what the store keeps; a leaked database gives no working
credential.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from hyperhive.errors import InvalidName

__all__ = ["hash_secret", "new_secret", "validate_host_name", "verify_secret"]

_PREFIX = "hhc1_"  # names the format, so a pasted credential is recognisable in a leak scan


def new_secret() -> str:
    """A fresh credential: a format prefix and 32 random bytes, URL-safe."""
    return _PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def verify_secret(secret: str, stored_hash: str) -> bool:
    """Whether ``secret`` is the one ``stored_hash`` was made from (constant time)."""
    return hmac.compare_digest(hash_secret(secret), stored_hash)


_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


def validate_host_name(name: str) -> str:
    """A host name: lowercase letters, digits and dashes, 1-63 long, not starting with a dash."""
    if not _NAME.fullmatch(name):
        raise InvalidName(
            f"agent host name {name!r} is not allowed: use 1-63 lowercase letters, digits "
            "and dashes, starting with a letter or digit (e.g. 'rack2-node7')"
        )
    return name
