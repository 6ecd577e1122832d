"""Shared parsing toolkit for CLI-based vendor plugins (``npu-smi``, ``cnmon``, ``mx-smi``...).

This package is the private home of :mod:`accel.toolkit`, the public, versioned API a plugin
author writes against (``docs/guides/plugin-toolkit.md``).  Out-of-tree plugins import
:mod:`accel.toolkit`; in-tree plugins may import from here, and everything here may change
at any time except what ``accel.toolkit`` re-exports.  The ``_``-prefixed modules are private::

    from accel.plugins._cli import (
        ParseContext, SourceLine, split_lines,           # where text came from, typed errors
        find_box_tables, find_aligned_table,             # tables found by landmarks
        parse_kv,                                        # "Key : Value" blocks and sections
        parse_query_csv,                                 # --query-gpu=... --format=csv output
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

**Problems.**  A record that fails to parse is a typed problem of the snapshot (``Snapshot.problems``,
``HostInventory.problems``), and a device it still identifies (``identify_record``: bus id,
index) stays listed with health ``unknown`` (``unread_units``, which ``ToolBackend.build`` applies).
Under every table reader sits a census (``census``, ``with_census``, applied by ``ToolBackend``
after ``collect``): a PCI address a device list prints in a table row that no parsed unit has is
a ``record`` problem and a listed device, so a chip whose record a mangled rule or header merged
away is never silently missing.  The box readers keep a mangled row inside its table (a line
between two table lines, ``mangled_rule``) instead of ending the table there.

**Plugins.**  Every CLI plugin has one shape: a ``LazyCliPlugin`` entry-point object (``info =
cli_plugin_info(...)``, ``probe_spec``, ``package`` and ``backend = "module:Class"``, imported
on open only) over a ``ToolBackend`` subclass.  ``cli_plugin_info`` takes the vendor the devices
report where it is not the backend id (``ascend`` reports ``huawei``).

**Backends.**  ``UnitReading`` and ``build_unit`` turn one unit as a tool prints it into a
``Device`` and a ``Telemetry`` sample with the same rules everywhere (stable id from the UUID
else the bus id, ``used > total`` becomes a health condition, not a validation crash).
``CliBackend`` / ``ToolBackend`` answer the three reads from one ``Snapshot`` of tool runs,
remember lost devices (``_snapshot``) and simulate faults over replays (``_faults``);
``ProcessesSurface`` and ``PartitionsSurface`` add the optional surfaces a plugin declares.
A ``ToolBackend`` sets class attributes (``backend_name``, ``vendor``, ``tool`` or
``alternatives``, ``kind``, the binding's ``visible_env`` ... ``device_nodes``) and implements
``collect(col)``: ``col.required`` / ``main`` read device lists (census-checked), ``extra`` a
view whose absence is expected, ``secondary`` a view the host should answer (its failure is a
problem), ``session_for`` a second tool; ``self.build`` makes the units.
``read_header_records``, ``RecordReader`` and ``Lenient`` read tables the box reader cannot
frame (no outer border, doubled rules, headerless fragments) and record garbage fields as
conditions; ``parse_listing`` reads ``-L`` listings; ``matrix_links`` / ``link_domains`` turn a
``topo -m`` matrix into typed links and domains.  :mod:`accel.plugins._cli.testing`'s
``conformance_scenarios`` registers a plugin's shipped replays with the conformance kit (only a
plugin's ``conformance`` module imports it, so runtime code never loads the kit).

**Running.**  ``runner_for(config, __package__)`` picks ``config.runner``, else the shipped
scenario named by ``options["scenario"]``, else the real runner.  ``ToolSession`` runs the tool
with the backend's timeout and search path and counts invocations per snapshot.
"""

from ._csv import QueryColumn, QueryRow, QueryTable, parse_query_csv
from ._kv import KVEntry, KVSection, parse_kv
from ._listing import Listed, ProcessRow, parse_listing, parse_process_rows, processes_of
from ._matrix import Matrix, first_line, read_matrix, read_records, select_table, title_match
from ._plugin import BASE_CAPABILITIES, CliBackendPlugin, LazyCliPlugin, cli_plugin_info
from ._probe import CliProbeSpec, probe_cli
from ._problems import census, identify_record, identify_text, problem_of, problems_of, unread_units
from ._records import (
    Lenient,
    RecordReader,
    condition,
    first_match,
    header_rows,
    is_rule,
    read_header_records,
    split_cells,
    table_under_header,
    unreadable,
)
from ._scenario import ReplayScenario, scenario_names, scenario_path, shipped_scenario_runner
from ._session import ToolSession, check_deadline, runner_for, snapshot_deadline
from ._snapshot import CliBackend, PartitionsSurface, ProcessesSurface, Snapshot
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
    mangled_rule,
)
from ._text import MAX_LINE_CHARS, ParseContext, SourceLine, split_lines
from ._tool import Collection, ToolBackend, ToolView, with_census
from ._topo import PCIE_CODES, link_domains, matrix_links, topo_links
from ._unit import (
    NEVER_READ,
    TABLE_NEVER_PRINTS,
    UnitReading,
    bounded,
    build_unit,
    build_units,
    memory_condition,
    merge_readings,
    out_of_bounds_errors,
    source_info,
    validated,
    visible_binding,
)
from ._values import (
    PLACEHOLDERS,
    PLAUSIBLE,
    clean,
    extra_implausible,
    implausible,
    is_masked,
    is_placeholder,
    is_sentinel,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_float,
    parse_hertz,
    parse_int,
    parse_pair,
    parse_power_pair,
    parse_quantity,
    parse_ratio,
    parse_used_total,
    parse_watts,
)

__all__ = [
    "BASE_CAPABILITIES",
    "MAX_LINE_CHARS",
    "NEVER_READ",
    "PCIE_CODES",
    "PLACEHOLDERS",
    "PLAUSIBLE",
    "TABLE_NEVER_PRINTS",
    "AlignedTable",
    "BoxRecord",
    "BoxRow",
    "BoxTable",
    "CliBackend",
    "CliBackendPlugin",
    "CliProbeSpec",
    "Collection",
    "HeaderField",
    "KVEntry",
    "KVSection",
    "LazyCliPlugin",
    "Lenient",
    "Listed",
    "Matrix",
    "ParseContext",
    "PartitionsSurface",
    "ProcessRow",
    "ProcessesSurface",
    "QueryColumn",
    "QueryRow",
    "QueryTable",
    "RecordReader",
    "ReplayScenario",
    "Snapshot",
    "SourceLine",
    "ToolBackend",
    "ToolSession",
    "ToolView",
    "UnitReading",
    "assign_fields",
    "bounded",
    "build_unit",
    "build_units",
    "census",
    "check_deadline",
    "clean",
    "cli_plugin_info",
    "condition",
    "extra_implausible",
    "find_aligned_table",
    "find_box_tables",
    "first_line",
    "first_match",
    "header_fields",
    "header_rows",
    "identify_record",
    "identify_text",
    "implausible",
    "is_masked",
    "is_placeholder",
    "is_rule",
    "is_sentinel",
    "link_domains",
    "mangled_rule",
    "matrix_links",
    "memory_condition",
    "merge_readings",
    "out_of_bounds_errors",
    "parse_bus_id",
    "parse_bytes",
    "parse_celsius",
    "parse_float",
    "parse_hertz",
    "parse_int",
    "parse_kv",
    "parse_listing",
    "parse_pair",
    "parse_power_pair",
    "parse_process_rows",
    "parse_quantity",
    "parse_query_csv",
    "parse_ratio",
    "parse_used_total",
    "parse_watts",
    "probe_cli",
    "problem_of",
    "problems_of",
    "processes_of",
    "read_header_records",
    "read_matrix",
    "read_records",
    "runner_for",
    "scenario_names",
    "scenario_path",
    "select_table",
    "shipped_scenario_runner",
    "snapshot_deadline",
    "source_info",
    "split_cells",
    "split_lines",
    "table_under_header",
    "title_match",
    "topo_links",
    "unread_units",
    "unreadable",
    "validated",
    "visible_binding",
    "with_census",
]
