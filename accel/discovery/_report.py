"""What discovery learnt: one :class:`BackendEntry` per backend in a :class:`DiscoveryReport`,
the ``ACCEL_BACKENDS`` selection, and the isolation layer's error codes."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..errors import AccelError, ConfigError
from ..plugin import ApiVersion, BackendPlugin

ENV_SELECTION = "ACCEL_BACKENDS"

#: The distribution accel itself ships in: its backends win a name clash (see ``docs/isolation.md``).
OWN_DISTRIBUTION = "accel-sdk"

#: Error codes of the isolation layer (on :class:`~accel.errors.PluginError` subclasses).
CODE_TIMEOUT = "plugin.timeout"
CODE_INVALID_RETURN = "plugin.invalid-return"
CODE_DUPLICATE = "plugin.duplicate-name"


class EntryStatus(StrEnum):
    PRESENT = "present"
    ABSENT = "absent"
    FAILED = "failed"
    REJECTED = "rejected"
    DISABLED = "disabled"
    OPEN = "open"


class Stage(StrEnum):
    LOAD = "load"
    PROBE = "probe"
    OPEN = "open"
    READ = "read"


@dataclass(frozen=True)
class BackendEntry:
    """What discovery learnt about one backend."""

    name: str
    status: EntryStatus
    reason: str = ""
    stage: Stage | None = None
    origin: str = "entry-point"
    plugin_version: str | None = None
    vendor: str | None = None
    api_version: ApiVersion | None = None
    error: AccelError | None = field(default=None, compare=False, repr=False)
    device_count: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "reason": self.reason,
            "stage": self.stage.value if self.stage else None,
            "origin": self.origin,
            "plugin_version": self.plugin_version,
            "vendor": self.vendor,
            "api_version": str(self.api_version) if self.api_version else None,
            "error_code": self.error.code if self.error else None,
            "device_count": self.device_count,
        }


@dataclass
class DiscoveryReport:
    """Every backend seen, with its outcome.  ``plugins`` holds the usable plugin objects."""

    entries: list[BackendEntry] = field(default_factory=list)
    plugins: dict[str, BackendPlugin] = field(default_factory=dict, repr=False)

    def entry(self, name: str) -> BackendEntry:
        for e in self.entries:
            if e.name == name:
                return e
        raise KeyError(name)

    def _set(self, new: BackendEntry) -> None:
        self.entries = [new if e.name == new.name else e for e in self.entries]
        if all(e.name != new.name for e in self.entries):
            self.entries.append(new)

    def by_status(self, status: EntryStatus) -> list[BackendEntry]:
        return [e for e in self.entries if e.status is status]

    @property
    def present(self) -> list[str]:
        return [e.name for e in self.entries if e.status in (EntryStatus.PRESENT, EntryStatus.OPEN)]

    def as_dict(self) -> dict[str, Any]:
        return {"backends": [e.as_dict() for e in self.entries]}


@dataclass(frozen=True)
class Selection:
    """Allow / deny lists: ``nvidia,sim`` allows only those; ``-nvidia`` denies one."""

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()

    def permits(self, name: str) -> bool:
        if name in self.deny:
            return False
        return self.allow is None or name in self.allow


def parse_selection(text: str | None) -> Selection:
    """Parse ``ACCEL_BACKENDS``: a comma list; names prefixed with ``-`` are denied."""
    if not text or not text.strip():
        return Selection()
    allow: set[str] = set()
    deny: set[str] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        if item.startswith("-"):
            deny.add(item[1:].strip())
        else:
            allow.add(item)
    for name in allow | deny:
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ConfigError(f"{ENV_SELECTION}: invalid backend name {name!r}")
    return Selection(frozenset(allow) if allow else None, frozenset(deny))

