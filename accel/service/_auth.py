"""Tokens, tenants and the per-token rate limit of ``accel serve``.

A token reads ``accel_<id>_<secret>``: ``id`` finds its row, ``secret`` is checked against
the row's scrypt hash (:func:`hashlib.scrypt`, a fresh 16-byte salt per token) with
:func:`hmac.compare_digest`.  Only the hash is stored.  A token that checked once is
remembered by its SHA-256 (in memory only), so a busy client does not pay scrypt's cost on
every request; an unknown id still costs one scrypt, so timing does not say which ids exist.

On first start the service writes an admin token to ``STATE/admin.token`` (mode 0600, created
exclusively: an existing file is never overwritten).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from accel.errors import ConfigError

from ._store import ServiceStore, TokenRow

__all__ = ["ADMIN_TOKEN_FILE", "TENANT_RE", "Principal", "RateLimiter", "TokenBook", "ensure_admin_token"]

ADMIN_TOKEN_FILE = "admin.token"
#: A tenant name: what a job, a bill line and a token carry.
TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_TOKEN_RE = re.compile(r"^accel_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
# scrypt cost: n=2**14, r=8 (16 MiB, tens of ms): the parameters of the standard library's docs' example
_N, _R, _P = 2**14, 8, 1
_DUMMY_SALT = b"\x00" * 16


def _hash(secret: str, salt: bytes) -> bytes:
    return hashlib.scrypt(secret.encode("ascii"), salt=salt, n=_N, r=_R, p=_P, dklen=32)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: a tenant member, or an admin (who sees every tenant)."""

    token_id: str
    tenant: str
    admin: bool

    @property
    def actor(self) -> str:
        return f"{'admin' if self.admin else 'tenant'}:{self.tenant} (token {self.token_id[:6]})"

    def sees(self, tenant: str) -> bool:
        return self.admin or tenant == self.tenant


class TokenBook:
    """Issues and checks tokens against the service store."""

    def __init__(self, store: ServiceStore, *, cache_size: int = 4096) -> None:
        self._store = store
        self._cache: dict[bytes, Principal] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._slow = threading.Lock()

    def create(self, tenant: str, *, admin: bool = False, label: str = "") -> str:
        """A new token for ``tenant``; only its hash is stored.  Returns the token itself."""
        if not TENANT_RE.match(tenant):
            raise ConfigError(f"tenant {tenant!r}: use 1 to 63 of a-z, 0-9, '.', '_', '-', starting with a letter "
                              "or digit")
        token_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        salt = os.urandom(16)
        self._store.add_token(TokenRow(token_id, tenant, admin, salt, _hash(secret, salt), label))
        return f"accel_{token_id}_{secret}"

    def cached(self, token: str) -> Principal | None:
        """The principal of a token that checked before (a SHA-256 and a dict lookup, no scrypt
        and no I/O: safe on the event loop), else ``None`` (then call :meth:`check`)."""
        key = hashlib.sha256(token.encode("utf-8", "replace")).digest()
        with self._lock:
            return self._cache.get(key)

    def check(self, token: str) -> Principal | None:
        """The principal ``token`` belongs to, or ``None`` (malformed, unknown or wrong)."""
        key = hashlib.sha256(token.encode("utf-8", "replace")).digest()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        m = _TOKEN_RE.match(token)
        if m is None:
            return None
        with self._slow:  # one scrypt at a time: a burst of new clients does not stampede the CPUs
            return self._check_slow(key, m)

    def _check_slow(self, key: bytes, m: re.Match[str]) -> Principal | None:
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        row = self._store.token(m.group(1))
        if row is None:
            _hash(m.group(2), _DUMMY_SALT)  # the same work as a known id: timing says nothing
            return None
        if not hmac.compare_digest(_hash(m.group(2), row.salt), row.hash):
            return None
        who = Principal(row.id, row.tenant, row.admin)
        with self._lock:
            if len(self._cache) >= self._cache_size:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = who
        return who


def ensure_admin_token(state: Path, book: TokenBook, store: ServiceStore) -> Path | None:
    """On a fresh state directory, issue an admin token into ``STATE/admin.token`` (0600).

    Returns the file's path when it wrote one, ``None`` when tokens existed already."""
    if store.token_count() > 0:
        return None
    path = state / ADMIN_TOKEN_FILE
    token = book.create("admin", admin=True, label="first start")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(token + "\n")
    return path


class RateLimiter:
    """A token bucket per key (a token id, or a client address before it has one): ``rate``
    requests per second on average, bursts of ``burst``."""

    def __init__(self, rate: float, burst: int) -> None:
        if not (rate > 0 and burst >= 1):
            raise ConfigError(f"rate limit must be > 0 per second with a burst >= 1, not {rate}/{burst}")
        self.rate, self.burst = rate, float(burst)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str, now: float | None = None) -> float:
        """0.0 when the request may go on, else the seconds to wait before retrying."""
        t = time.monotonic() if now is None else now
        with self._lock:
            level, last = self._buckets.get(key, (self.burst, t))
            level = min(self.burst, level + (t - last) * self.rate)
            if level >= 1.0:
                self._buckets[key] = (level - 1.0, t)
                return 0.0
            self._buckets[key] = (level, t)
            if len(self._buckets) > 100_000:  # forget idle keys rather than grow without bound
                self._buckets.clear()
            return (1.0 - level) / self.rate
