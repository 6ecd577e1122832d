"""accel.toolkit: the curated, versioned API a plugin author writes against."""

from __future__ import annotations

import inspect
import json
import pickle
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import accel.toolkit as toolkit
from accel.toolkit import TOOLKIT_API_VERSION

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "plugin-toolkit.md"


def test_all_is_sorted_and_every_name_resolves() -> None:
    names = list(toolkit.__all__)
    assert names == sorted(names, key=lambda s: (not s.isupper(), s))
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(toolkit, name), name


def test_every_callable_has_its_own_docstring() -> None:
    missing = []
    for name in toolkit.__all__:
        obj = getattr(toolkit, name)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and not (obj.__doc__ or "").strip():
            missing.append(name)
    assert not missing, missing


def test_every_name_is_documented_in_the_guide() -> None:
    # Constants carry no docstring of their own: the guide's reference table documents them all.
    text = GUIDE.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([A-Za-z_]+)`", text, flags=re.MULTILINE))
    assert set(toolkit.__all__) <= rows, sorted(set(toolkit.__all__) - rows)
    assert f"`TOOLKIT_API_VERSION` is `{TOOLKIT_API_VERSION}`" in text


def test_version_is_major_minor() -> None:
    assert re.fullmatch(r"[1-9][0-9]*\.[0-9]+", TOOLKIT_API_VERSION)


def test_toolkit_does_not_load_the_conformance_kit() -> None:
    code = "import sys, json, accel.toolkit; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = json.loads(out.stdout)
    assert not [m for m in loaded if m.startswith("accel.conformance")]
    assert not [m for m in loaded if m.split(".")[0] in ("pytest", "_pytest")]


def test_public_objects_name_accel_toolkit_as_their_home() -> None:
    """As httpx does: a public class or function says it lives in ``accel.toolkit`` (reprs,
    pickles), except the classes whose annotations resolve only in their defining module."""
    for name in toolkit.__all__:
        obj = getattr(toolkit, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if name in toolkit._KEEP_MODULE:
            home = obj.__module__
            assert home.startswith("accel.toolkit._"), (name, home)
            obj.__module__ = "accel.toolkit"  # the list is minimal: moved, its hints break
            try:
                with pytest.raises(NameError):
                    typing.get_type_hints(obj)
            finally:
                obj.__module__ = home
        else:
            assert obj.__module__ == "accel.toolkit", (name, obj.__module__)
            typing.get_type_hints(obj)
            assert pickle.loads(pickle.dumps(obj)) is obj
    ctx = toolkit.ParseContext("tool", "tool -q")
    assert pickle.loads(pickle.dumps(ctx)) == ctx
    assert repr(toolkit.BoxRecord).endswith("'accel.toolkit.BoxRecord'>")
