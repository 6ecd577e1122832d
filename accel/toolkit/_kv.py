"""Key/value output: ``npu-smi info -t board``, ``-q`` style detail views with sections.

``parse_kv`` reads lines of ``Key : Value`` (the separator is the first ``:`` followed by
whitespace or the end of the line, so values like ``0000:81:00.0`` or ``12:00:01`` stay whole)
into a tree of :class:`KVSection`: a line without a separator that is followed by more deeply
indented lines opens a section (``FB Memory Usage`` in ``-q`` outputs); indentation closes it.
Blank lines split flat outputs into :attr:`KVSection.blocks` (``npu-smi info -t common`` has
one block per chip and one for the MCU).  Lines that are neither (banners, ``...`` elisions)
are kept in :attr:`KVSection.loose` so callers can reject or ignore them knowingly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ._text import SourceLine, split_lines

__all__ = ["KVEntry", "KVSection", "parse_kv"]



def _separator(body: str) -> tuple[int, int] | None:
    """``(start, end)`` of the first ``:`` followed by whitespace or the end of ``body``, with
    the whitespace around it; ``None`` when there is none.  Linear in ``body`` (a regex with
    ``\\s*:`` and ``search`` rescans every run of spaces, quadratic on one long line)."""
    i = body.find(":")
    while i != -1:
        after = i + 1
        if after == len(body) or body[after].isspace():
            start = len(body[:i].rstrip())
            end = len(body) - len(body[after:].lstrip())
            return start, end
        i = body.find(":", after)
    return None


@dataclass(frozen=True)
class KVEntry:
    """One ``key : value`` line.  ``key`` has its inner whitespace collapsed; ``value`` is
    stripped (``""`` when the line ends at the separator)."""

    key: str
    value: str
    line: SourceLine
    block: int = 0


@dataclass
class KVSection:
    """A section of key/value lines; the root section has ``name`` ``None``."""

    name: str | None
    line: SourceLine | None = None
    entries: list[KVEntry] = field(default_factory=list)
    sections: list[KVSection] = field(default_factory=list)
    loose: list[SourceLine] = field(default_factory=list)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of the first entry named ``key`` (whitespace-insensitive, case-insensitive)."""
        wanted = _norm(key)
        for e in self.entries:
            if _norm(e.key) == wanted:
                return e.value
        return default

    def entry(self, key: str) -> KVEntry | None:
        """The first entry named ``key`` (for its line, to put in an error)."""
        wanted = _norm(key)
        return next((e for e in self.entries if _norm(e.key) == wanted), None)

    def get_all(self, key: str) -> list[str]:
        wanted = _norm(key)
        return [e.value for e in self.entries if _norm(e.key) == wanted]

    def section(self, name: str) -> KVSection | None:
        """The first direct sub-section called ``name`` (case-insensitive)."""
        wanted = _norm(name)
        return next((s for s in self.sections if s.name is not None and _norm(s.name) == wanted), None)

    def walk(self) -> Iterator[KVSection]:
        """This section and every sub-section, depth first."""
        yield self
        for s in self.sections:
            yield from s.walk()

    @property
    def blocks(self) -> list[list[KVEntry]]:
        """Direct entries grouped by the blank lines between them."""
        groups: dict[int, list[KVEntry]] = {}
        for e in self.entries:
            groups.setdefault(e.block, []).append(e)
        return [groups[k] for k in sorted(groups)]

    def as_dict(self) -> dict[str, str]:
        """Direct entries as a dict (first occurrence of a key wins)."""
        out: dict[str, str] = {}
        for e in self.entries:
            out.setdefault(e.key, e.value)
        return out


def _norm(key: str) -> str:
    return " ".join(key.split()).lower()


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def parse_kv(text: str | Sequence[SourceLine]) -> KVSection:
    """Parse key/value output into a :class:`KVSection` tree (see the module docstring)."""
    lines = split_lines(text) if isinstance(text, str) else list(text)
    root = KVSection(None)
    # Stack of (indent of the section's own header line, section).
    stack: list[tuple[int, KVSection]] = [(-1, root)]
    block = 0
    pending_blank = False
    # The indent of the next non-blank line after each position, computed once (looking ahead
    # from every line would be quadratic in the number of lines).
    next_indent: list[int | None] = [None] * len(lines)
    following: int | None = None
    for pos in range(len(lines) - 1, -1, -1):
        next_indent[pos] = following
        if not lines[pos].blank:
            following = _indent(lines[pos].text)
    for pos, line in enumerate(lines):
        if line.blank:
            pending_blank = True
            continue
        if pending_blank:
            block += 1
            pending_blank = False
        indent = _indent(line.text)
        while len(stack) > 1 and indent <= stack[-1][0]:
            stack.pop()
        current = stack[-1][1]
        body = line.text.strip()
        sep = _separator(body)
        if sep is not None and sep[0] > 0:
            key = " ".join(body[: sep[0]].split())
            current.entries.append(KVEntry(key, body[sep[1] :].strip(), line, block))
            continue
        nxt = next_indent[pos]
        if nxt is not None and nxt > indent:
            sec = KVSection(body.rstrip(":").strip(), line)
            current.sections.append(sec)
            stack.append((indent, sec))
        else:
            current.loose.append(line)
    return root
