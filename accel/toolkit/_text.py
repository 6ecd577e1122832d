"""Source lines and parse errors: every parser reports *where* it failed.

A vendor-output parser works on :class:`SourceLine` objects (text plus its 1-based line number
in the tool's stdout) and raises :class:`accel.errors.ParseError` built by a
:class:`ParseContext`, which names the tool, the exact command and the offending line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from accel.errors import ParseError

__all__ = ["MAX_LINE_CHARS", "ParseContext", "SourceLine", "split_lines"]

#: The longest line a text parser accepts.  The widest line of every sampled tool is under
#: 700 characters (a 64-device topology matrix would be ~900); a longer line is garbage, and
#: refusing it up front keeps every parser's time linear in the output (a tool timeout
#: covers the tool, not our parsing).
MAX_LINE_CHARS = 8192

# Characters that break naive parsers but carry no meaning in a table: BOM, NUL, ANSI colour.
_INVISIBLE = str.maketrans({"\ufeff": None, "\x00": None})


@dataclass(frozen=True)
class SourceLine:
    """One line of tool output: ``text`` without the newline, ``lineno`` counted from 1."""

    text: str
    lineno: int

    def __str__(self) -> str:
        return self.text

    @property
    def blank(self) -> bool:
        """True for an empty or whitespace-only line."""
        return not self.text.strip()


def _strip_ansi(text: str) -> str:
    # ESC [ ... final-byte; Hygon's rocminfo banner is coloured this way.
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\x1b" and i + 1 < len(text) and text[i + 1] == "[":
            j = i + 2
            while j < len(text) and not ("@" <= text[j] <= "~"):
                j += 1
            i = j + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def split_lines(text: str, *, expand_tabs: int | None = 8) -> list[SourceLine]:
    """Split tool output into :class:`SourceLine` objects.

    Line endings (``\\n``, ``\\r\\n``, a stray ``\\r``) are dropped, trailing whitespace is kept
    (column positions matter for aligned tables), ANSI colour sequences, BOMs and NULs are
    removed, and tabs are expanded to ``expand_tabs`` columns (``None`` keeps them) so that a
    header starting with a TAB (``npu-smi info -t topo``) lines up with its rows.

    A line longer than :data:`MAX_LINE_CHARS` (after tab expansion) raises
    :class:`~accel.errors.ParseError` naming its number and length: no tool prints one, and
    table parsers would spend time per character on it again and again.
    """
    result: list[SourceLine] = []
    for i, raw in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1):
        if len(raw) > MAX_LINE_CHARS:
            _too_long(raw, i)
        line = (
            _strip_ansi(raw.translate(_INVISIBLE))
            if ("\x1b" in raw or "\ufeff" in raw or "\x00" in raw)
            else raw
        )
        if expand_tabs is not None and "\t" in line:
            if line.count("\t") * expand_tabs + len(line) > MAX_LINE_CHARS:
                _too_long(line, i)
            line = line.expandtabs(expand_tabs)
            if len(line) > MAX_LINE_CHARS:
                _too_long(line, i)
        result.append(SourceLine(line, i))
    if result and not result[-1].text:
        result.pop()  # the newline at the end of the output is not a line
    return result


def _too_long(line: str, lineno: int) -> None:
    raise ParseError(
        f"line {lineno} is {len(line)} characters long; no tool output line is longer than "
        f"{MAX_LINE_CHARS} (garbage in the output)",
        line=line[:80] + "...",
        lineno=lineno,
    )


@dataclass(frozen=True)
class ParseContext:
    """Which tool and command produced the text being parsed; builds the errors.

    ``command`` is the command line as a person would type it (``"npu-smi info -t topo"``)::

        ctx = ParseContext("npu-smi", "npu-smi info")
        raise ctx.error("no 'Bus-Id' column in the header", line)

    Unit and value helpers of :mod:`accel.toolkit` raise a bare :class:`ParseError`
    (no tool, no line); wrap the code that reads one line in :meth:`at` so the error that
    leaves the parser names all three::

        with ctx.at(line):
            total = parse_bytes(cell, bare_unit="MiB")
    """

    tool: str
    command: str

    def error(
        self, message: str, line: SourceLine | str | None = None, lineno: int | None = None
    ) -> ParseError:
        """A :class:`ParseError` naming this tool, this command and (optionally) the line."""
        if isinstance(line, SourceLine):
            return ParseError(
                message, tool=self.tool, command=self.command, line=line.text, lineno=line.lineno
            )
        return ParseError(message, tool=self.tool, command=self.command, line=line, lineno=lineno)

    @contextlib.contextmanager
    def at(self, line: SourceLine | None) -> Iterator[None]:
        """Re-raise a :class:`ParseError` (or :class:`ValueError`) inside the block as one that
        names this tool, command and ``line``.  An error that already names a tool passes."""
        try:
            yield
        except ParseError as exc:
            if exc.tool is not None:
                raise
            raise self.error(_bare_message(exc), line) from exc
        except ValueError as exc:
            raise self.error(str(exc), line) from exc

    def require(self, lines: Sequence[SourceLine], what: str) -> None:
        """Raise "empty output" when ``lines`` has no non-blank line (``what`` names the expectation)."""
        if not any(not ln.blank for ln in lines):
            raise self.error(f"empty output: expected {what}")


def _bare_message(exc: ParseError) -> str:
    # ParseError.message already has the location suffixes appended; for a bare error it is
    # just the message (plus ": 'line'" when only the line was given).
    return exc.message
