"""Shared parsing toolkit for CLI-based vendor plugins (``npu-smi``, ``cnmon``, ``mx-smi``...).

Import what you need from here; the ``_``-prefixed modules are private::

    from accel.plugins._cli import (
        ParseContext, SourceLine, split_lines,           # where text came from, typed errors
        find_box_tables, find_aligned_table,             # tables found by landmarks
        parse_kv,                                        # "Key : Value" blocks and sections
        clean, parse_bytes, parse_used_total, parse_watts, parse_celsius,
        parse_hertz, parse_ratio, parse_int, parse_float, parse_bus_id,
        CliProbeSpec, probe_cli,                         # sysfs -> /dev -> tool probe
        ToolSession, runner_for, ReplayScenario,         # running tools, replay scenarios
    )

**Errors.**  Parsers raise :class:`accel.errors.ParseError` only.  Build them with
``ctx.error(message, line)`` (a :class:`ParseContext` names tool and command; a
:class:`SourceLine` carries the text and line number), or let a value helper raise a bare one
inside ``with ctx.at(line):``, which adds tool, command and line.  Parse one device per
``try`` so one bad row never hides the others; collect its error and carry on.

**Tables.**  ``find_box_tables(text)`` returns every ``+---+`` / ``|===|`` table (title
banner rows, header rows, records of rows; each data row has ``fields`` keyed by header
name).  ``find_aligned_table(text, r"^NPU ID\\s+Chip ID")`` finds a whitespace-aligned table by
its header; pass ``row_label=True`` for matrices (``NPU0  X  HCCS ...``; label under ``""``).
Fields are assigned by column overlap, so right-aligned and shifted values still land right.

**Values.**  Placeholders (``N/A``, ``NA``, ``-``, ``--``, ``Not Supported``...) and masked
values (``xxx``) are ``None``.  Units are taken from the text; ``bare_unit=`` states what a
number printed without one means (from the column header); ``binary_prefixes=`` says whether
``MB`` means MiB for this vendor (``None`` refuses to guess).  ``parse_bus_id`` delegates to
:func:`accel.model.normalize_bus_id` (``00000000:3B:00.0`` and ``3b:00.0`` both work).

**Probing.**  ``probe_cli(CliProbeSpec(...), config)`` checks PCI vendor id (and class) in
sysfs, then device nodes, then the tool (through ``config.runner.which`` under replay).  It
never raises.

**Matrices and records.**  ``read_matrix(text, ctx, header=..., valid_code=...)`` reads a
``topo -m`` style matrix with its CPU Affinity column; ``select_table`` picks the box table with
given columns; ``read_records`` reads every record collecting per-record errors.

**Plugins.**  ``CliBackendPlugin`` is the entry-point base: set ``info``, ``probe_spec``,
``package`` and implement ``open_with(config, runner)``.

**Running.**  ``runner_for(config, __package__)`` picks ``config.runner``, else the shipped
scenario named by ``options["scenario"]``, else the real runner.  ``ToolSession`` runs the tool
with the backend's timeout and search path and counts invocations per snapshot.
"""

from ._kv import KVEntry, KVSection, parse_kv
from ._matrix import Matrix, first_line, read_matrix, read_records, select_table, title_match
from ._plugin import CliBackendPlugin
from ._probe import CliProbeSpec, probe_cli
from ._scenario import ReplayScenario, scenario_names, scenario_path, shipped_scenario_runner
from ._session import ToolSession, runner_for
from ._tables import (
    AlignedTable,
    BoxRecord,
    BoxRow,
    BoxTable,
    HeaderField,
    assign_fields,
    find_aligned_table,
    find_box_tables,
    header_fields,
)
from ._text import ParseContext, SourceLine, split_lines
from ._values import (
    PLACEHOLDERS,
    clean,
    is_masked,
    is_placeholder,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_float,
    parse_hertz,
    parse_int,
    parse_quantity,
    parse_ratio,
    parse_used_total,
    parse_watts,
)

__all__ = [
    "PLACEHOLDERS",
    "AlignedTable",
    "BoxRecord",
    "BoxRow",
    "BoxTable",
    "CliBackendPlugin",
    "CliProbeSpec",
    "HeaderField",
    "KVEntry",
    "KVSection",
    "Matrix",
    "ParseContext",
    "ReplayScenario",
    "SourceLine",
    "ToolSession",
    "assign_fields",
    "clean",
    "find_aligned_table",
    "find_box_tables",
    "first_line",
    "header_fields",
    "is_masked",
    "is_placeholder",
    "parse_bus_id",
    "parse_bytes",
    "parse_celsius",
    "parse_float",
    "parse_hertz",
    "parse_int",
    "parse_kv",
    "parse_quantity",
    "parse_ratio",
    "parse_used_total",
    "parse_watts",
    "probe_cli",
    "read_matrix",
    "read_records",
    "runner_for",
    "scenario_names",
    "scenario_path",
    "select_table",
    "shipped_scenario_runner",
    "split_lines",
    "title_match",
]
