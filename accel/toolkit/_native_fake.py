"""Fakes of vendor libraries: a Python object a native backend calls exactly as the C library.

A fake subclasses :class:`FakeLibrary`, names its :class:`~accel.toolkit.SignatureTable` in
``TABLE`` and defines one method per C function, under the C name, taking the C arguments and
returning the integer return code.  Out-parameters arrive as the backend passed them
(``ctypes.byref(x)``, ``ctypes.pointer(x)``, an array); :func:`deref` gives the object to fill.
Every call is first converted by the declared ``argtypes`` as ctypes converts a real call (a
wrong count raises :class:`TypeError`, a wrong type :class:`ctypes.ArgumentError`), so the
backend's code runs unchanged against the fake and a wrong call fails here as on hardware.
"""

from __future__ import annotations

import ctypes
import inspect
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from ._native import SignatureTable, by_value_mismatch

_BASE_NAMES: frozenset[str] = frozenset()  # set below, once FakeLibrary exists


def deref(arg: Any) -> Any:
    """The ctypes object behind an out-parameter: ``byref(x)`` and ``pointer(x)`` give ``x``;
    an array or a structure passed as itself is returned as is."""
    obj = getattr(arg, "_obj", None)  # ctypes.byref's CArgObject
    if obj is not None:
        return obj
    if isinstance(arg, ctypes._Pointer):
        return arg.contents
    if isinstance(arg, ctypes._SimpleCData | ctypes.Structure | ctypes.Union | ctypes.Array):
        return arg
    raise TypeError(f"not an out-parameter: {type(arg).__name__}")


def set_out(arg: Any, value: Any) -> None:
    """Write ``value`` through a scalar out-parameter (``byref(c_uint())`` and the like)."""
    deref(arg).value = value


class FakeLibrary:
    """Base of a fake vendor library (see the module docstring).

    ``inject(name, rc)`` makes ``name`` return ``rc`` without running (a driver error);
    ``hang_on(name)`` makes calls to ``name`` block until :meth:`release` (a hung library).
    ``calls`` counts the calls by name.
    """

    TABLE: ClassVar[SignatureTable]

    def __init__(self) -> None:
        if not isinstance(getattr(type(self), "TABLE", None), SignatureTable):
            raise TypeError(f"{type(self).__name__} must set TABLE to the SignatureTable it fakes")
        self.calls: dict[str, int] = {}
        self._injected: dict[str, int] = {}
        self._hang: set[str] = set()
        self._released = threading.Event()
        for name in fake_functions(self):
            if name in self.TABLE:
                setattr(self, name, self._checked(name, getattr(self, name)))

    def inject(self, name: str, rc: int) -> None:
        """Make every later call to ``name`` return ``rc`` (clear with :meth:`clear`)."""
        self._injected[name] = rc

    def clear(self, name: str) -> None:
        """Undo :meth:`inject` and :meth:`hang_on` for ``name``."""
        self._injected.pop(name, None)
        self._hang.discard(name)

    def hang_on(self, name: str) -> None:
        """Make calls to ``name`` block until :meth:`release`."""
        self._hang.add(name)

    def release(self) -> None:
        """Let every blocked call return (a test's cleanup)."""
        self._released.set()

    def _checked(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        fn = self.TABLE[name]

        def call(*args: Any) -> Any:
            if len(args) != len(fn.argtypes):
                raise TypeError(f"{name} takes {len(fn.argtypes)} arguments ({len(args)} given)")
            wrong = by_value_mismatch(name, fn.argtypes, args)
            if wrong is not None:
                raise wrong
            for i, (argtype, arg) in enumerate(zip(fn.argtypes, args, strict=True), start=1):
                try:
                    argtype.from_param(arg)
                except (TypeError, ValueError) as exc:
                    raise ctypes.ArgumentError(f"argument {i}: {type(exc).__name__}: {exc}") from exc
            self.calls[name] = self.calls.get(name, 0) + 1
            if name in self._hang:
                self._released.wait()
            rc = self._injected[name] if name in self._injected else method(*args)
            if fn.restype is None:
                return None
            if isinstance(rc, int) and issubclass(fn.restype, ctypes._SimpleCData):
                return fn.restype(rc).value  # wrapped as ctypes wraps a C int (c_uint: no negatives)
            return rc

        call.__name__ = name
        call.__wrapped__ = method  # type: ignore[attr-defined]
        return call


def fake_functions(fake: object) -> dict[str, int | None]:
    """The functions a fake exposes, each with its parameter count (``None`` for ``*args``)."""
    out: dict[str, int | None] = {}
    for name in dir(type(fake)):
        if name.startswith("_") or name in _BASE_NAMES:
            continue
        attr = getattr(fake, name)
        if not callable(attr) or isinstance(attr, type):
            continue
        target = inspect.unwrap(attr)
        try:
            params = inspect.signature(target).parameters.values()
        except (TypeError, ValueError):
            out[name] = None
            continue
        if any(p.kind is p.VAR_POSITIONAL for p in params):
            out[name] = None
        else:
            out[name] = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return out


_BASE_NAMES = frozenset(name for name in dir(FakeLibrary) if not name.startswith("_"))
