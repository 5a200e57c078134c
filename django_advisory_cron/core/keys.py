"""Job name -> advisory lock key.

The default key is the two-int form ``(namespace, objid)``: ``objid`` is the first four bytes of
the SHA-256 digest of the UTF-8 job name, read big-endian as a signed 32-bit integer. It is
computed in Python, so it is the same on every machine and every PostgreSQL version, and
rows of the server's lock table with our ``classid`` and ``objsubid = 2`` are ours.

A job that may run several times at once (``overlap="allow_all"``) has a key per run it may
have going, its slots: slot 1 is the job's key, slot ``k`` hashes the name followed by a unit
separator and ``slot k`` (in both modes), so the lock table still maps each to its job.

``hashtext`` mode reproduces the widely copied ``pg_try_advisory_lock(hashtext(name))`` so that a
job can share its lock with existing SQL scripts. ``hashtext`` is internal to PostgreSQL and
not promised stable across major versions.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Literal

from .. import conf
from ..conf import app_settings

KeyMode = Literal["sha256", "hashtext"]
KEY_MODES: tuple[KeyMode, ...] = ("sha256", "hashtext")
#: Between a job's name and its slot in a later slot's hashed text (a job's name has none).
SLOT_SEPARATOR = "\x1f"


def name_hash(name: str) -> int:
    """The signed 32-bit hash of a job name used as ``objid``."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "big", signed=True)


@dataclass(frozen=True)
class LockKey:
    """An advisory lock key, able to render itself as SQL function arguments."""

    name: str
    mode: KeyMode = "sha256"
    namespace: int = conf.DEFAULT_NAMESPACE
    #: Which of the job's runs at once it is for (1: the job's own key).
    slot: int = 1

    @property
    def text(self) -> str:
        """What is hashed: the name, or for a later slot the name and the slot."""
        return self.name if self.slot == 1 else f"{self.name}{SLOT_SEPARATOR}slot {self.slot}"

    @functools.cached_property
    def objid(self) -> int:
        """The second key (signed) in ``sha256`` mode."""
        return name_hash(self.text)

    def slot_key(self, slot: int) -> LockKey:
        """The key of the job's run slot ``slot`` (1: this one)."""
        return LockKey(self.name, self.mode, self.namespace, slot)

    def waiting_key(self) -> LockKey:
        """The key that serialises the recording of the job's waiting ticks (overlap
        ``buffer_one``, ``buffer_all``): held for a transaction, never while a run goes."""
        return LockKey(f"{self.name}{SLOT_SEPARATOR}waiting", self.mode, self.namespace)

    @property
    def sql(self) -> str:
        """Arguments for ``pg_*advisory*lock(...)``, with named placeholders."""
        return "%(lock_ns)s, %(lock_id)s" if self.mode == "sha256" else "hashtext(%(lock_name)s)"

    @property
    def params(self) -> dict[str, int | str]:
        """Parameters for ``sql``."""
        if self.mode == "sha256":
            return {"lock_ns": self.namespace, "lock_id": self.objid}
        return {"lock_name": self.text}

    @property
    def lock_ids(self) -> tuple[int, int, int] | None:
        """``(classid, objid, objsubid)`` as the server's lock table shows them (oids are unsigned).

        ``None`` in ``hashtext`` mode: the value is only known to the server.
        """
        if self.mode != "sha256":
            return None
        return (self.namespace & 0xFFFFFFFF, self.objid & 0xFFFFFFFF, 2)

    def same_lock(self, other: LockKey) -> bool:
        """Whether ``other`` takes the lock this key takes: in ``sha256`` mode two names can
        (their ``objid`` is 32 bits of a hash), which equality, comparing names, misses. In
        ``hashtext`` mode only the server knows the value: the same name."""
        if self.mode != other.mode:
            return False
        if self.mode == "sha256":
            return (self.namespace, self.objid) == (other.namespace, other.objid)
        return self.text == other.text

    def __str__(self) -> str:
        if self.mode == "sha256":
            return f"({self.namespace}, {self.objid})"
        return f"hashtext({self.text!r})"


def job_key(name: str, mode: KeyMode = "sha256", namespace: int | None = None) -> LockKey:
    """The lock key of a job name under the configured namespace."""
    if mode not in KEY_MODES:
        raise ValueError(f"key mode must be one of {KEY_MODES}, not {mode!r}")
    return LockKey(name, mode, app_settings.NAMESPACE if namespace is None else namespace)
