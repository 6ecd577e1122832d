"""The one error tree of accel.

Every error that leaves a public accel API is an :class:`AccelError` with a stable ``code``.
Vendor exceptions are mapped at each plugin's boundary module and kept as ``__cause__``::

    AccelError
    ├── ConfigError                 bad configuration or arguments (unknown backend, bad env)
    ├── ValidationError             a model value is nonsense (names the field)
    ├── ProfileError                a simulator profile file is malformed
    ├── PluginError
    │   ├── PluginLoadError         the entry point could not be imported
    │   ├── IncompatiblePluginError no common plugin API version
    │   └── BackendUnavailableError the backend is absent or failed to open
    ├── DeviceError                 a device-level failure (carries ``device_id``)
    │   ├── DeviceLostError         the device fell off the bus / is gone
    │   ├── NotSupportedError       the device or driver cannot report this
    │   └── PartitionError          creating / destroying a partition was refused (names the cause)
    │       ├── PartitionProfileNotSupportedError  the profile does not exist on this product
    │       ├── PartitionNoPlacementError          no free placement / capacity left for it
    │       ├── PartitionModeOffError              MIG (vNPU...) mode is off on the parent
    │       ├── PartitionProcessesRunningError     processes run on the parent (a mode change)
    │       ├── PartitionBusyError                 the partition has processes: not destroyed
    │       ├── PartitionNotFoundError             no such partition
    │       └── PartitionCreateFailedError         creation failed half-way (says what is left)
    ├── PermissionDeniedError       the caller lacks permission (containers, non-root)
    ├── DriverError                 the vendor library or driver failed (carries ``vendor_code``)
    │   ├── LibraryNotFoundError    the vendor library is not installed
    │   └── DriverVersionError      driver / library mismatch or too old
    ├── ToolError                   a vendor CLI failed (carries ``tool`` and ``argv``)
    │   ├── ToolNotFoundError
    │   ├── ToolNotExecutableError
    │   ├── ToolTimeoutError
    │   ├── ToolExitError
    │   ├── ToolOutputTooLargeError
    │   └── ReplayMissingError      a replay directory has no recording for the argv
    ├── ParseError                  vendor output could not be parsed (names tool, command, line)
    └── SchedulerError              an invalid scheduling request or state (accel.scheduler)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "AccelError",
    "BackendUnavailableError",
    "ConfigError",
    "DeviceError",
    "DeviceLostError",
    "DriverError",
    "DriverVersionError",
    "IncompatiblePluginError",
    "LibraryNotFoundError",
    "NotSupportedError",
    "OutOfBoundsError",
    "ParseError",
    "PartitionBusyError",
    "PartitionCreateFailedError",
    "PartitionError",
    "PartitionModeOffError",
    "PartitionNoPlacementError",
    "PartitionNotFoundError",
    "PartitionProcessesRunningError",
    "PartitionProfileNotSupportedError",
    "PermissionDeniedError",
    "PluginError",
    "PluginLoadError",
    "ProfileError",
    "ReplayMissingError",
    "SchedulerError",
    "ToolError",
    "ToolExitError",
    "ToolNotExecutableError",
    "ToolNotFoundError",
    "ToolOutputTooLargeError",
    "ToolTimeoutError",
    "ValidationError",
]


class AccelError(Exception):
    """Root of every accel error.  ``code`` is stable and machine-readable."""

    code: str = "accel.error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class ConfigError(AccelError):
    code = "config.invalid"


class ValidationError(AccelError):
    """A model value failed validation.  ``field`` names the offending field path."""

    code = "model.invalid"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.field = field


class OutOfBoundsError(ValidationError):
    """A reading no device can have (outside the unit's physical bounds, or not finite).

    Not raised by reads: toolkit plugins collect it, leave the value out (``None``: unknown)
    and report it as a ``field`` problem naming ``device_id`` and ``field``.
    """

    code = "model.out-of-bounds"

    def __init__(
        self, message: str, *, field: str | None = None, device_id: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message, field=field, code=code)
        self.device_id = device_id


class ProfileError(AccelError):
    code = "sim.profile-invalid"


class PluginError(AccelError):
    code = "plugin.error"

    def __init__(self, message: str, *, plugin: str | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.plugin = plugin


class PluginLoadError(PluginError):
    code = "plugin.load-failed"


class IncompatiblePluginError(PluginError):
    code = "plugin.incompatible"


class BackendUnavailableError(PluginError):
    code = "plugin.unavailable"


class DeviceError(AccelError):
    code = "device.error"

    def __init__(self, message: str, *, device_id: str | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.device_id = device_id


class DeviceLostError(DeviceError):
    code = "device.lost"


class NotSupportedError(DeviceError):
    code = "device.not-supported"


class PartitionError(DeviceError):
    """Creating or destroying a partition was refused.  ``device_id`` names the parent device,
    ``profile`` the profile asked for, ``partition_id`` the partition concerned (each ``None``
    when it does not apply); the subclass names the cause."""

    code = "partition.error"

    def __init__(
        self,
        message: str,
        *,
        device_id: str | None = None,
        profile: str | None = None,
        partition_id: str | None = None,
        vendor_code: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message, device_id=device_id, code=code)
        self.profile = profile
        self.partition_id = partition_id
        #: The vendor library's own code when it gave one (``NVML_ERROR_INSUFFICIENT_RESOURCES``).
        self.vendor_code = vendor_code


class PartitionProfileNotSupportedError(PartitionError):
    """The profile does not exist on this product (``7g.80gb`` on an A100-40GB, ``vir16`` on 910B)."""

    code = "partition.profile-not-supported"

    @classmethod
    def not_offered(
        cls, device_id: str, model: str | None, profile: str, offered: Iterable[str], *, what: str = "profile"
    ) -> PartitionProfileNotSupportedError:
        """The refusal every actuator gives for a name the device does not offer, listing what it does."""
        names = ", ".join(offered) or "none: the product cannot be partitioned"
        on = f"{model} ({device_id})" if model else device_id
        return cls(f"{what} {profile!r} is not offered by {on}; offered: {names}", device_id=device_id, profile=profile)


class PartitionNoPlacementError(PartitionError):
    """The profile exists, but no placement (memory slices, AI cores, instance count) is left."""

    code = "partition.no-placement"


class PartitionModeOffError(PartitionError):
    """The parent is not in the mode partitions need (MIG mode off, vNPU mode off)."""

    code = "partition.mode-off"


class PartitionProcessesRunningError(PartitionError):
    """Processes run on the parent device, and the change (a compute / memory mode) needs it idle."""

    code = "partition.processes-running"


class PartitionBusyError(PartitionError):
    """The partition has processes (or compute instances) on it: it was not destroyed."""

    code = "partition.busy"


class PartitionNotFoundError(PartitionError):
    """No live partition has this id (already destroyed, or never made)."""

    code = "partition.not-found"


class PartitionCreateFailedError(PartitionError):
    """Creation failed half-way.  ``left_behind`` lists the ids of what could not be undone
    (empty: everything made was removed again); each also appears in the next inventory."""

    code = "partition.create-failed"

    def __init__(self, message: str, *, left_behind: Sequence[str] = (), **kwargs: str | None) -> None:
        super().__init__(message, **kwargs)
        self.left_behind = tuple(left_behind)


class PermissionDeniedError(AccelError):
    code = "permission.denied"


class DriverError(AccelError):
    """The vendor library or driver reported an error.  ``vendor_code`` keeps its own code."""

    code = "driver.error"

    def __init__(self, message: str, *, vendor_code: str | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.vendor_code = vendor_code


class LibraryNotFoundError(DriverError):
    code = "driver.library-not-found"


class DriverVersionError(DriverError):
    code = "driver.version-mismatch"


class ToolError(AccelError):
    """A vendor command-line tool failed.  ``tool`` is its name, ``argv`` the full command."""

    code = "tool.error"

    def __init__(
        self,
        message: str,
        *,
        tool: str | None = None,
        argv: Sequence[str] = (),
        code: str | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.tool = tool
        self.argv = tuple(argv)


class ToolNotFoundError(ToolError):
    code = "tool.not-found"


class ToolNotExecutableError(ToolError):
    code = "tool.not-executable"


class ToolTimeoutError(ToolError):
    code = "tool.timeout"


class ToolExitError(ToolError):
    code = "tool.exit-status"

    def __init__(
        self,
        message: str,
        *,
        tool: str | None = None,
        argv: Sequence[str] = (),
        returncode: int = 1,
        stderr: str = "",
        code: str | None = None,
    ) -> None:
        super().__init__(message, tool=tool, argv=argv, code=code)
        self.returncode = returncode
        self.stderr = stderr


class ToolOutputTooLargeError(ToolError):
    code = "tool.output-too-large"


class ReplayMissingError(ToolError):
    code = "tool.replay-missing"


class ParseError(AccelError):
    """Vendor output could not be parsed.  Names the tool, the command and the offending line."""

    code = "parse.error"

    def __init__(
        self,
        message: str,
        *,
        tool: str | None = None,
        command: str | None = None,
        line: str | None = None,
        lineno: int | None = None,
        code: str | None = None,
    ) -> None:
        where = []
        if tool:
            where.append(f"tool {tool!r}")
        if command:
            where.append(f"command {command!r}")
        if lineno is not None:
            where.append(f"line {lineno}")
        full = message
        if where:
            full = f"{message} ({', '.join(where)})"
        if line is not None:
            full = f"{full}: {line.strip()[:200]!r}"
        super().__init__(full, code=code)
        self.tool = tool
        self.command = command
        self.line = line
        self.lineno = lineno
        #: What identifies the device the unreadable record belongs to, when anything does
        #: (set by the toolkit's record readers), and the id it is then listed under.
        self.device_index: int | None = None
        self.bus_id: str | None = None
        self.device_id: str | None = None


class SchedulerError(AccelError):
    code = "scheduler.error"
