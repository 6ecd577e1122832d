"""Native-library plugins: load a vendor's management library with ctypes and call it safely.

A vendor's C library is described by two small tables a plugin writes once:

* a :class:`SignatureTable`: every function the plugin calls, its argument and return ctypes and
  the public source the signature was read from (:class:`SignatureSource`: repository, path,
  commit), so a test can check every call against it (:func:`signature_problems`);
* an :class:`ErrorTable`: the library's integer return codes mapped to accel's typed errors.

:func:`load_library` finds the library (environment override, then the vendor's standard
locations) and :class:`NativeLibrary` wraps it: each call is declared, made under a deadline in a
worker thread, and its return code mapped.  Nothing here loads a library at import time.
"""

from __future__ import annotations

import ctypes
import os
import queue
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from accel.errors import (
    AccelError,
    ConfigError,
    DeviceError,
    DeviceLostError,
    DriverError,
    DriverVersionError,
    LibraryNotFoundError,
    NotSupportedError,
    PermissionDeniedError,
)

#: What a vendor return code means to accel (the values of an :class:`ErrorTable`).
ErrorKind = Literal[
    "not-supported",
    "not-found",
    "no-permission",
    "driver-not-loaded",
    "timeout",
    "lost",
    "version",
    "invalid-argument",
    "uninitialized",
    "unknown",
]

# kind -> (accel error class, stable accel code); the codes are those the NVML backend uses.
_KINDS: Final[dict[str, tuple[type[AccelError], str]]] = {
    "not-supported": (NotSupportedError, "device.not-supported"),
    "not-found": (DeviceError, "device.not-found"),
    "no-permission": (PermissionDeniedError, "permission.denied"),
    "driver-not-loaded": (DriverError, "driver.not-loaded"),
    "timeout": (DriverError, "driver.timeout"),
    "lost": (DeviceLostError, "device.lost"),
    "version": (DriverVersionError, "driver.version-mismatch"),
    "invalid-argument": (DriverError, "driver.invalid-argument"),
    "uninitialized": (DriverError, "driver.uninitialized"),
    "unknown": (DriverError, "driver.unknown"),
}

_COMMIT: Final = re.compile(r"[0-9a-f]{40}")
_REPO: Final = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")

#: ctypes type of an argument or a result (``None`` for ``void``).
CType = Any

_S = TypeVar("_S", bound=ctypes.Structure)

#: The base class of every function a loaded ctypes library hands out (private in ctypes).
_C_FUNCTION: Final[type[Any]] = ctypes.__dict__["_CFuncPtr"]


def by_value_mismatch(name: str, argtypes: Sequence[CType], args: Sequence[Any]) -> ctypes.ArgumentError | None:
    """The error for ``byref(x)`` / ``pointer(x)`` passed where ``name`` takes a struct by value.

    ctypes hands such an argument to ``Structure.from_param``, which crashes CPython (a
    segmentation fault, not an exception) instead of refusing it; this check runs first, so a
    plugin's mistake is a ``ctypes.ArgumentError`` naming the argument."""
    for i, (argtype, arg) in enumerate(zip(argtypes, args, strict=False), start=1):
        by_value = isinstance(argtype, type) and issubclass(argtype, (ctypes.Structure, ctypes.Union))
        if by_value and (type(arg).__name__ == "CArgObject" or isinstance(arg, ctypes._Pointer)):
            return ctypes.ArgumentError(f"{name}: argument {i}: {argtype.__name__} is passed by value; got a reference")
    return None


@dataclass(frozen=True, slots=True)
class SignatureSource:
    """Where a signature was read: ``repo`` (``owner/name``), ``path`` in it, the full ``commit``.

    A package (a wheel, not a repository) is named as ``repo="pypi/<name>"``, ``commit`` the
    40-hex SHA-1 of the file it was read from.  Bad values raise :class:`ValueError`.
    """

    repo: str
    path: str
    commit: str

    def __post_init__(self) -> None:
        if not _REPO.fullmatch(self.repo):
            raise ValueError(f"signature source repo {self.repo!r} is not owner/name")
        if not self.path or self.path.startswith("/"):
            raise ValueError(f"signature source path {self.path!r} must be a path inside the repository")
        if not _COMMIT.fullmatch(self.commit):
            raise ValueError(f"signature source commit {self.commit!r} is not 40 lowercase hex digits")

    def __str__(self) -> str:
        return f"{self.repo}@{self.commit}:{self.path}"


@dataclass(frozen=True, slots=True)
class NativeFunction:
    """One C function: its ``name``, ``argtypes``, ``restype`` (``None`` = void) and ``source``."""

    name: str
    argtypes: tuple[CType, ...]
    restype: CType
    source: SignatureSource


@dataclass(frozen=True)
class SignatureTable:
    """Every function of one ``library`` a plugin calls, by name.

    Build it with :meth:`of`; :meth:`bind` sets ``argtypes`` / ``restype`` on a loaded library's
    functions (so ctypes converts and checks each argument); :func:`signature_problems` checks a
    backend's calls and a fake's functions against it.
    """

    library: str
    functions: Mapping[str, NativeFunction]

    @classmethod
    def of(cls, library: str, *functions: NativeFunction) -> SignatureTable:
        """The table of ``functions``; a name declared twice raises :class:`ValueError`."""
        table: dict[str, NativeFunction] = {}
        for fn in functions:
            if fn.name in table:
                raise ValueError(f"{library}: {fn.name} is declared twice")
            table[fn.name] = fn
        return cls(library, table)

    def __contains__(self, name: object) -> bool:
        return name in self.functions

    def __getitem__(self, name: str) -> NativeFunction:
        return self.functions[name]

    def bind(self, lib: object) -> dict[str, Callable[..., Any]]:
        """The declared functions ``lib`` has, typed; a symbol ``lib`` lacks is left out."""
        bound: dict[str, Callable[..., Any]] = {}
        for name, fn in self.functions.items():
            try:
                func = getattr(lib, name)
            except AttributeError:
                continue
            if isinstance(func, _C_FUNCTION):
                func.argtypes = list(fn.argtypes)
                func.restype = fn.restype
            bound[name] = func
        return bound


@dataclass(frozen=True)
class ErrorTable:
    """A library's return codes: ``success``, and each error code's ``(kind, vendor name)``.

    A code missing from ``codes`` is ``unknown`` (a :class:`~accel.errors.DriverError` that
    keeps the number in ``vendor_code``).  ``vendor`` prefixes ``vendor_code``
    (``"cambricon.cndev:1"``).
    """

    vendor: str
    codes: Mapping[int, tuple[ErrorKind, str]]
    success: frozenset[int] = frozenset({0})

    def __post_init__(self) -> None:
        bad = [kind for kind, _ in self.codes.values() if kind not in _KINDS]
        if bad:
            raise ValueError(f"{self.vendor}: unknown error kinds {sorted(set(bad))}")

    def error(self, rc: int, *, fn: str = "", device_id: str | None = None) -> AccelError:
        """The typed error for return code ``rc`` of ``fn`` (the caller raises it)."""
        kind, name = self.codes.get(rc, ("unknown", "unknown code"))
        return _make_error(kind, f"{self.vendor} error {rc} ({name}){_where(fn)}", self.vendor, str(rc), device_id)

    def check(self, rc: int, *, fn: str = "", device_id: str | None = None) -> None:
        """Raise :meth:`error` unless ``rc`` is a success code."""
        if rc not in self.success:
            raise self.error(rc, fn=fn, device_id=device_id)


def _where(fn: str) -> str:
    return f" in {fn}" if fn else ""


def _make_error(kind: str, message: str, vendor: str, vendor_code: str, device_id: str | None) -> AccelError:
    cls, code = _KINDS[kind]
    if issubclass(cls, DeviceError):
        return cls(message, device_id=device_id, code=code)
    if issubclass(cls, DriverError):
        return cls(message, vendor_code=f"{vendor}:{vendor_code}", code=code)
    return cls(message, code=code)


def library_candidates(
    names: Sequence[str],
    *,
    env_var: str | None = None,
    dirs: Sequence[str | Path] = (),
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """The paths :func:`load_library` tries, in order.

    ``env_var`` (``ACCEL_<VENDOR>_LIB``) set: only what it names, a file or a directory holding
    one of ``names``.  Otherwise each name in each of ``dirs`` (a ``$VAR`` in a directory is
    expanded from ``environ``; one whose variable is unset is skipped), then each bare name (the
    loader's own search: ``LD_LIBRARY_PATH``, ``ld.so.cache``).
    """
    env = os.environ if environ is None else environ
    if env_var and env.get(env_var):
        override = env[env_var]
        if os.path.isdir(override):
            return [os.path.join(override, name) for name in names]
        return [override]
    out: list[str] = []
    for d in dirs:
        text = str(d)
        expanded = _expand(text, env)
        if expanded is None:
            continue
        out.extend(os.path.join(expanded, name) for name in names)
    out.extend(names)
    return list(dict.fromkeys(out))


def _expand(text: str, env: Mapping[str, str]) -> str | None:
    missing = False

    def sub(m: re.Match[str]) -> str:
        nonlocal missing
        value = env.get(m.group(1) or m.group(2))
        if not value:
            missing = True
            return ""
        return value

    out = re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, text)
    return None if missing else out


def load_library(
    vendor: str,
    names: Sequence[str],
    *,
    env_var: str | None = None,
    dirs: Sequence[str | Path] = (),
    environ: Mapping[str, str] | None = None,
    loader: Callable[[str], object] = ctypes.CDLL,
) -> object:
    """Load ``vendor``'s library from the first of :func:`library_candidates` that loads.

    When none loads, raises :class:`~accel.errors.LibraryNotFoundError` naming every path tried
    and why each failed (``vendor_code`` ``<vendor>:library-not-found``).  Call it from a
    backend's ``open``, never at import time.  ``loader`` is ``ctypes.CDLL`` (a test passes one
    that returns a fake).
    """
    tried: list[str] = []
    for path in library_candidates(names, env_var=env_var, dirs=dirs, environ=environ):
        try:
            return loader(path)
        except OSError as exc:
            tried.append(f"{path} ({_short(exc)})")
    how = f"; set {env_var} to the library's path" if env_var else ""
    raise LibraryNotFoundError(
        f"{vendor}: no library loaded, tried: {', '.join(tried) or 'nothing'}{how}",
        vendor_code=f"{vendor}:library-not-found",
    )


def _short(exc: OSError) -> str:
    text = str(exc).strip()
    return text if len(text) <= 160 else text[:157] + "..."


def struct_version(struct: type[ctypes.Structure], number: int) -> int:
    """NVML's versioned-struct value: ``sizeof(struct) | number << 24`` (``NVML_STRUCT_VERSION``)."""
    if not 0 < number < 256:
        raise ValueError(f"struct version {number} is not in 1..255")
    return ctypes.sizeof(struct) | (number << 24)


def versioned(struct: type[_S], version: int, *, sized: bool = False) -> _S:
    """A fresh ``struct`` whose ``version`` field is set: to ``version`` as given (CNDev's
    ``CNDEV_VERSION_n``), or with ``sized=True`` to :func:`struct_version` (NVML's ``_v2``)."""
    names = [f[0] for f in getattr(struct, "_fields_", ())]
    if "version" not in names:
        raise TypeError(f"{struct.__name__} has no version field")
    obj = struct()
    obj.version = struct_version(struct, version) if sized else version
    return obj


class _Worker:
    """One daemon thread that makes the library's calls, so a caller can stop waiting."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], _Slot] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"accel-native-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, slot = item
            try:
                slot.value = job()
            except BaseException as exc:  # noqa: BLE001 -- handed back to the caller, raised there
                slot.error = exc
            slot.done.set()

    def submit(self, job: Callable[[], Any]) -> _Slot:
        slot = _Slot()
        self._jobs.put((job, slot))
        return slot

    def stop(self) -> None:
        """End the thread once the call it is making (if any) returns."""
        self._jobs.put(None)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


@dataclass
class _Slot:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None


class NativeLibrary:
    """A loaded vendor library, called only through its :class:`SignatureTable`.

    ``call(name, *args)`` calls a declared function and returns its result; with ``errors`` its
    return code is checked and a failure raised as the typed error the :class:`ErrorTable` names.
    A function the table does not declare raises :class:`~accel.errors.ConfigError` (a bug in the
    plugin); one the loaded library lacks raises :class:`~accel.errors.NotSupportedError` with code
    ``driver.function-not-found`` (an older library: the field is unsupported).

    With ``timeout_s`` each call runs in a worker thread; one that does not return in time raises
    a :class:`~accel.errors.DriverError` with code ``driver.timeout``, and every later call raises
    the same without calling the library again (a hung library stays hung).  A call that can
    legitimately take longer (one with its own wait argument) passes ``deadline_s``.  Calls are
    made one at a time (vendor libraries are rarely thread-safe): a caller waits for the one
    before it, and the deadline counts from its own start.  :meth:`close` (or ``with``) ends the
    worker thread.  ``calls`` counts the calls made by name, for tests.
    """

    def __init__(
        self,
        lib: object,
        table: SignatureTable,
        errors: ErrorTable | None = None,
        *,
        timeout_s: float | None = 5.0,
    ) -> None:
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError("timeout_s must be positive or None")
        self.lib = lib
        self.table = table
        self.errors = errors
        self.timeout_s = timeout_s
        self.calls: dict[str, int] = {}
        self._bound = table.bind(lib)
        self._hung: str | None = None
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> NativeLibrary:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker thread; a later :meth:`call` raises :class:`~accel.errors.ConfigError`.
        A worker stuck in a hung call is left to the process (a daemon thread)."""
        self._closed = True
        if self._worker is not None:
            self._worker.stop()
            self._worker = None

    @property
    def hung(self) -> str | None:
        """The function that hung the library (``None`` while it answers)."""
        return self._hung

    def has(self, name: str) -> bool:
        """True when ``name`` is declared and the loaded library has it."""
        return name in self._bound

    def call(
        self,
        name: str,
        *args: Any,
        device_id: str | None = None,
        check: bool = True,
        deadline_s: float | None = None,
    ) -> Any:
        """Call ``name`` with ``args``; with ``check`` (and an :class:`ErrorTable`) map its code.
        ``deadline_s`` replaces the library's ``timeout_s`` for this call."""
        if name not in self.table:
            raise ConfigError(f"{self.table.library}: {name} is not in the signature table")
        if deadline_s is not None and not deadline_s > 0:
            raise ValueError("deadline_s must be positive or None")
        func = self._bound.get(name)
        if func is None:
            raise NotSupportedError(
                f"{self.table.library} has no function {name}", device_id=device_id, code="driver.function-not-found"
            )
        wrong = by_value_mismatch(name, self.table[name].argtypes, args)
        if wrong is not None:
            raise DriverError(f"{self.table.library}: {name} rejected its arguments: {wrong}", code="driver.binding")
        with self._lock:
            if self._closed:
                raise ConfigError(f"{self.table.library} is closed; {name} was not called")
            if self._hung is not None:
                raise self._timeout(name, again=True)
            self.calls[name] = self.calls.get(name, 0) + 1
            rc = self._invoke(name, func, args, self.timeout_s if deadline_s is None else deadline_s)
        if check and self.errors is not None and isinstance(rc, int):
            self.errors.check(rc, fn=name, device_id=device_id)
        return rc

    def supported(self, name: str, *args: Any, device_id: str | None = None) -> bool:
        """:meth:`call`, returning False where the library cannot report it (not supported, or
        no such function in this library); any other failure still raises."""
        try:
            self.call(name, *args, device_id=device_id)
        except NotSupportedError:
            return False
        return True

    def _invoke(self, name: str, func: Callable[..., Any], args: tuple[Any, ...], timeout_s: float | None) -> Any:
        # Called with self._lock held: one call at a time.
        try:
            if timeout_s is None:
                return func(*args)
            if self._worker is None:
                self._worker = _Worker(self.table.library)
            slot = self._worker.submit(lambda: func(*args))
            if not slot.done.wait(timeout_s):
                self._hung = name
                self._worker = None  # stuck in the call; a daemon thread, never reused
                raise self._timeout(name, again=False, waited_s=timeout_s)
            if slot.error is not None:
                raise slot.error
            return slot.value
        except AccelError:
            raise
        except (ctypes.ArgumentError, TypeError) as exc:
            raise DriverError(
                f"{self.table.library}: {name} rejected its arguments: {exc}", code="driver.binding"
            ) from exc

    def _timeout(self, name: str, *, again: bool, waited_s: float | None = None) -> DriverError:
        # A hung library is not one device's fault: the error names the library, not a device.
        if again:
            message = f"{self.table.library} hung in {self._hung}; not called again for {name}"
        else:
            message = f"{self.table.library}: {name} did not return within {waited_s} s"
        return DriverError(message, vendor_code=f"{self.table.library}:hung", code="driver.timeout")


def signature_problems(table: SignatureTable, *, calls: Iterable[str] = (), fake: object | None = None) -> list[str]:
    """What does not match ``table``: each called name it lacks, each function ``fake`` exposes
    that it lacks, and each fake function whose parameter count differs from the declared
    ``argtypes``.  Empty when everything matches (assert it in a plugin's signature test)."""
    problems = [
        f"{name} is called but not in the {table.library} table" for name in sorted(set(calls) - set(table.functions))
    ]
    if fake is not None:
        from ._native_fake import fake_functions

        for name, params in sorted(fake_functions(fake).items()):
            if name not in table:
                problems.append(f"the fake exposes {name}, which is not in the {table.library} table")
            elif params is not None and params != len(table[name].argtypes):
                problems.append(
                    f"the fake's {name} takes {params} arguments, the table declares {len(table[name].argtypes)}"
                )
    return problems


class NativeCalls:
    """The calls of one read of one device (or the system) through a :class:`NativeLibrary`.

    ``calls(fn, *args)`` returns ``True`` when ``fn`` answered.  A field the library cannot
    report (``NotSupportedError``: not supported, or no such function in this release) gives
    ``False`` and nothing else: it stays unsupported.  Any other typed failure is appended to
    ``problems`` and gives ``False``, so one unreadable field never hides the others and the
    reading is reported as partial.  A hang (``driver.timeout``) propagates: it ends the read."""

    __slots__ = ("lib", "problems", "where")

    def __init__(self, lib: NativeLibrary, problems: list[AccelError], where: str) -> None:
        self.lib, self.problems, self.where = lib, problems, where

    def __call__(self, fn: str, *args: Any) -> bool:
        try:
            self.lib.call(fn, *args, device_id=self.where)
        except NotSupportedError:
            return False
        except AccelError as exc:
            if exc.code == "driver.timeout":
                raise
            self.problems.append(exc)
            return False
        return True
