"""The fuzz engine: real vendor outputs, mutated, through the replay path of every CLI plugin.

Every case is a replay of a real host: a shipped scenario of a CLI plugin, or a real sample
of ``tests/fixtures/<vendor>/`` substituted for the recording of the same command in one of
that vendor's scenarios.  A run mutates the stdout of one recording of a case (byte flips,
truncation, duplicated / deleted / swapped lines, huge, negative, sentinel, NaN and inf
numbers, unicode, CRLF, binary garbage, megabyte lines, shifted columns...), opens the
plugin over it and reads ``inventory()``, ``telemetry()`` and ``health()``.

A run fails when a non-accel exception leaves a public method, when the whole run takes
longer than :data:`MAX_SECONDS`, or when a reading lies outside the model's physical bounds
(:data:`accel.model.BOUNDS`, applied by the unit suffix of every numeric field and extra, so
the oracle does not trust the model's own validation).  The engine is deterministic for a
seed: a failure is reproduced by ``python -m tests.fuzz.run --seed S --only N``.
"""

from __future__ import annotations

import functools
import importlib
import math
import random
import re
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from accel.errors import AccelError
from accel.model import bound_of, extra_problem
from accel.plugin import BackendConfig
from accel.tools import Recording, ReplayRunner

PLUGINS = ("ascend", "cambricon", "enflame", "hygon", "iluvatar", "kunlunxin", "metax", "mthreads")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: No run (open and three reads, with the mutated output) may take longer.
MAX_SECONDS = 2.0


@dataclass(frozen=True)
class Case:
    """One replayed host: ``recordings`` of plugin ``plugin``; ``name`` says where it is from."""

    plugin: str
    name: str
    recordings: tuple[Recording, ...]


def _scenario_dirs(plugin: str) -> list[Path]:
    mod = importlib.import_module(f"accel.plugins.{plugin}")
    assert mod.__file__ is not None
    root = Path(mod.__file__).parent / "scenarios"
    return [d for d in sorted(root.iterdir()) if d.is_dir() and any(d.glob("*.json"))]


def _words(text: str) -> set[str]:
    head = [ln for ln in text.splitlines() if ln.strip()][:6]
    return set(re.findall(r"[A-Za-z][A-Za-z-]+", " ".join(head)))


@functools.cache
def cases() -> tuple[Case, ...]:
    """Every shipped scenario, plus every real sample of a vendor not already replayed by one,
    put in place of the recording it most resembles (same command, another tool version).

    A substituted sample the plugin does not read cleanly is left out: the plugin never runs
    that command (``ixsmi --query-gpu`` output has no replay path), so mutating it would only
    test the refusal.
    """
    out: list[Case] = []
    for plugin in PLUGINS:
        scenarios = [(d, tuple(ReplayRunner(d)._table.values())) for d in _scenario_dirs(plugin)]
        seen: set[str] = set()
        for d, recs in scenarios:
            out.append(Case(plugin, f"{plugin}/{d.name}", recs))
            seen.update(r.stdout for r in recs)
        samples = sorted((FIXTURES / plugin).glob("*.txt")) if (FIXTURES / plugin).is_dir() else []
        for sample in samples:
            text = sample.read_bytes().decode("utf-8", "replace")
            if text in seen:
                continue
            words = _words(text)
            named = set(re.findall(r"[a-z0-9]+", sample.name.lower()))
            best: tuple[float, Path, tuple[Recording, ...], int] | None = None
            for d, recs in scenarios:
                for i, rec in enumerate(recs):
                    other = _words(rec.stdout)
                    score = len(words & other) / max(1, len(words | other))
                    # The sample's file name says its command (``ixsmi-query-gpu-csv``,
                    # ``npu-smi-info-t-board``): the recording of that command wins.
                    args = set(re.findall(r"[a-z0-9]+", " ".join(rec.argv[1:]).lower()))
                    score += len(args & named) - 0.5 * len(args - named)
                    if best is None or score > best[0]:
                        best = (score, d, recs, i)
            if best is None or best[0] < 0.2:
                continue  # no command of this plugin prints anything like it
            _, d, recs, i = best
            swapped = (*recs[:i], Recording(recs[i].argv, stdout=text, source=str(sample)), *recs[i + 1 :])
            case = Case(plugin, f"{plugin}/{d.name}+{sample.name}", swapped)
            if read(case, swapped).kind == "ok":
                out.append(case)
    return tuple(out)


# --- mutations --------------------------------------------------------------------------

_NUM = re.compile(r"(?<![0-9A-Za-z.])[0-9]+(?:\.[0-9]+)?")
Mutator = Callable[[str, random.Random], str]


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _replace_number(text: str, rng: random.Random, make: Callable[[str], str]) -> str:
    found = list(_NUM.finditer(text))
    if not found:
        return text + make("1")
    m = rng.choice(found)
    return text[: m.start()] + make(m.group(0)) + text[m.end() :]


def _flip(text: str, rng: random.Random) -> str:
    if not text:
        return chr(rng.randrange(32, 127))
    chars = list(text)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(chars))
        chars[i] = rng.choice([*"|: -+=09.%\nx", chr(rng.randrange(32, 127))])
    return "".join(chars)


def _truncate_line(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    return "".join(lines[: rng.randrange(len(lines) + 1)])


def _truncate_char(text: str, rng: random.Random) -> str:
    return text[: rng.randrange(len(text) + 1)]


def _dup_line(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    if not lines:
        return text
    i = rng.randrange(len(lines))
    return "".join(lines[: i + 1] + [lines[i]] * rng.randint(1, 3) + lines[i + 1 :])


def _del_line(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    if not lines:
        return text
    i = rng.randrange(len(lines))
    n = rng.choice([1, 1, 1, 2, 5])
    return "".join(lines[:i] + lines[i + n :])


def _swap_lines(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    if len(lines) < 2:
        return text
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def _whole_dup(text: str, rng: random.Random) -> str:
    return text * rng.randint(2, 3)


_HUGE = ("9" * 20, "9" * 40, "1" + "0" * 29, "18446744073709551616", "1e30", "1e308", "123456789012345678")


def _huge(text: str, rng: random.Random) -> str:
    choice = rng.choice([*_HUGE, "9" * rng.choice([400, 5000])])
    return _replace_number(text, rng, lambda _n: choice)


def _negative(text: str, rng: random.Random) -> str:
    return _replace_number(text, rng, lambda n: "-" + n)


def _nan_inf(text: str, rng: random.Random) -> str:
    choice = rng.choice(["nan", "NaN", "inf", "-inf", "Infinity", "1e309", "-0", "+inf", "nan%", "infW"])
    return _replace_number(text, rng, lambda _n: choice)


_SENTINELS = ("4294967295", "65535", "0xFFFFFFFF", "0xffff", "-1", "18446744073709551615", "2147483647", "255")


def _sentinel(text: str, rng: random.Random) -> str:
    choice = rng.choice(_SENTINELS)
    return _replace_number(text, rng, lambda _n: choice)


_UNICODE = ("\u200b", "\u202e", "\uff11\uff12", "\u0301", "\u00e9", "\U0001f600", "\ufeff", "\u00a0", "\u2028",
            "\x85", "\u2502", "\u2500" * 5, "\u0660\u0661", "\ud7ff", "\u3000", "\uff1a")


def _unicode(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text) + 1)
    return text[:i] + rng.choice(_UNICODE) * rng.randint(1, 3) + text[i:]


def _crlf(text: str, rng: random.Random) -> str:
    if rng.random() < 0.5:
        return text.replace("\n", "\r\n")
    i = rng.randrange(len(text) + 1)
    return text[:i] + "\r" + text[i:]


def _binary(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text) + 1)
    junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))).decode("latin-1")
    return text[:i] + junk + text[i:]


_MEGA_PATTERNS = (" ", "x", "| ", ": ", "0", "a:", "-", "=", "+-", "|", "9 ", "\t", "ab ", " :", "GPU ")


def _mega_line(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    i = rng.randrange(len(lines) + 1)
    pattern = rng.choice(_MEGA_PATTERNS)
    size = rng.choice([20_000, 100_000, 1 << 20])
    big = (pattern * (size // len(pattern) + 1))[:size]
    if rng.random() < 0.5:
        big += rng.choice(["x", "|", ":", "1"])
    if rng.random() < 0.3 and lines:
        # Lengthen an existing line (a real row that goes on and on).
        j = min(i, len(lines) - 1)
        lines[j] = lines[j].rstrip("\n") + big + "\n"
        return "".join(lines)
    return "".join([*lines[:i], big + "\n", *lines[i:]])


def _shift(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    if not lines:
        return text
    i = rng.randrange(len(lines))
    j = min(len(lines), i + rng.randint(1, 6))
    col = rng.randrange(0, 80)
    n = rng.randint(1, 4)
    out = []
    for k, ln in enumerate(lines):
        if i <= k < j:
            ln = ln[:col] + " " * n + ln[col:] if rng.random() < 0.5 else ln[:col] + ln[col + n :]
        out.append(ln)
    return "".join(out)


def _empty(text: str, rng: random.Random) -> str:
    return rng.choice(["", "\n", "   \n\n", "\x00", "N/A\n", "{}", "[]", "null"])


MUTATORS: dict[str, Mutator] = {
    "flip": _flip,
    "truncate-line": _truncate_line,
    "truncate-char": _truncate_char,
    "dup-line": _dup_line,
    "del-line": _del_line,
    "swap-lines": _swap_lines,
    "dup-output": _whole_dup,
    "huge-number": _huge,
    "negative-number": _negative,
    "nan-inf": _nan_inf,
    "sentinel": _sentinel,
    "unicode": _unicode,
    "crlf": _crlf,
    "binary": _binary,
    "megabyte-line": _mega_line,
    "shift-columns": _shift,
    "empty": _empty,
}


# --- the oracle -------------------------------------------------------------------------


def _bound_for(key: str) -> tuple[float, float] | None:
    return bound_of(key.rsplit("/", 1)[-1])


def out_of_bounds(obj: object, path: str = "", unit: tuple[float, float] | None = None) -> Iterator[str]:
    """Every numeric leaf of ``obj`` outside the bound its name's unit suffix gives, and every
    non-finite float, as ``path = value``."""
    if isinstance(obj, BaseModel):
        for name in type(obj).model_fields:
            yield from out_of_bounds(getattr(obj, name), f"{path}.{name}" if path else name, _bound_for(name))
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            if "/" in str(key) and extra_problem(str(key), value) is not None:
                yield f"{path}[{key!r}] = {value!r}"  # a vendor extra (camelCase names too)
                continue
            yield from out_of_bounds(value, f"{path}[{key!r}]", _bound_for(str(key)) or unit)
    elif isinstance(obj, (list, tuple, frozenset, set)):
        for i, value in enumerate(obj):
            yield from out_of_bounds(value, f"{path}[{i}]", unit)
    elif isinstance(obj, bool):
        return
    elif isinstance(obj, (int, float)) and (
        (isinstance(obj, float) and not math.isfinite(obj)) or (unit is not None and not unit[0] <= obj <= unit[1])
    ):
        yield f"{path} = {obj!r}"


# --- running ----------------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str  # "ok" | "typed" | "escaped" | "slow" | "bounds"
    seconds: float
    detail: str = ""


def read(case: Case, recordings: tuple[Recording, ...]) -> Outcome:
    """Open ``case.plugin`` over ``recordings`` and read everything once."""
    plugin = importlib.import_module(f"accel.plugins.{case.plugin}").PLUGIN
    start = time.perf_counter()
    bad: list[str] = []
    kind = "ok"
    detail = ""
    try:
        config = BackendConfig(runner=ReplayRunner.from_recordings(recordings), enrich_from_sysfs=False)
        with plugin.open(config) as backend:
            inv = backend.inventory()
            bad.extend(out_of_bounds(inv, "inventory"))
            bad.extend(out_of_bounds(backend.telemetry(), "telemetry"))
            bad.extend(out_of_bounds(backend.health(), "health"))
    except AccelError as exc:
        kind, detail = "typed", f"{type(exc).__name__}: {exc}"[:300]
    except Exception as exc:  # noqa: BLE001 - this is what the fuzz looks for
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        kind = "escaped"
        detail = f"{type(exc).__name__}: {str(exc)[:200]} at {Path(tb.filename).name}:{tb.lineno}"
    seconds = time.perf_counter() - start
    if kind != "escaped" and bad:
        kind, detail = "bounds", "; ".join(bad[:5])
    if kind != "escaped" and seconds > MAX_SECONDS:
        kind, detail = "slow", f"{seconds:.2f} s ({detail or kind})"
    return Outcome(kind, seconds, detail)


@dataclass
class Run:
    number: int
    case: str
    recording: str
    mutator: str
    outcome: Outcome


@dataclass
class Summary:
    runs: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    by_mutator: dict[str, int] = field(default_factory=dict)
    failures: list[Run] = field(default_factory=list)
    slowest: float = 0.0
    seconds: float = 0.0

    def add(self, run: Run) -> None:
        self.runs += 1
        self.by_kind[run.outcome.kind] = self.by_kind.get(run.outcome.kind, 0) + 1
        self.by_mutator[run.mutator] = self.by_mutator.get(run.mutator, 0) + 1
        self.slowest = max(self.slowest, run.outcome.seconds)
        if run.outcome.kind in ("escaped", "slow", "bounds"):
            self.failures.append(run)


def mutate(case: Case, number: int, seed: int) -> tuple[int, str, tuple[Recording, ...]]:
    """The ``number``-th mutation of ``case`` for ``seed``: (recording index, mutator, recordings)."""
    rng = random.Random(f"{seed}:{case.name}:{number}")
    # The longest output is most often the one that matters (the device list).
    weights = [max(1, len(r.stdout)) ** 0.5 for r in case.recordings]
    i = rng.choices(range(len(case.recordings)), weights=weights)[0]
    name = rng.choice(sorted(MUTATORS))
    rec = case.recordings[i]
    text = MUTATORS[name](rec.stdout, rng)
    if rng.random() < 0.15:  # a second mutation on top: real damage rarely comes alone
        name2 = rng.choice(sorted(MUTATORS))
        text = MUTATORS[name2](text, rng)
        name = f"{name}+{name2}"
    mutated = Recording(rec.argv, stdout=text, stderr=rec.stderr, returncode=rec.returncode, source=rec.source)
    return i, name, (*case.recordings[:i], mutated, *case.recordings[i + 1 :])


def campaign(
    mutations: int,
    *,
    seed: int = 0,
    only: int | None = None,
    on_run: Callable[[Run], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> Summary:
    """``mutations`` runs spread over every case round-robin; deterministic for ``seed``."""
    all_cases = cases()
    summary = Summary()
    start = time.perf_counter()
    for number in range(mutations):
        if only is not None and number != only:
            continue
        case = all_cases[number % len(all_cases)]
        i, name, recs = mutate(case, number, seed)
        if on_start is not None:
            on_start(number)
        run = Run(number, case.name, " ".join(case.recordings[i].argv), name, read(case, recs))
        summary.add(run)
        if on_run is not None:
            on_run(run)
    summary.seconds = time.perf_counter() - start
    return summary


def clean_reads() -> dict[str, Any]:
    """Every case read unmutated (the baseline: must all be ``ok``)."""
    return {case.name: read(case, case.recordings) for case in cases()}
