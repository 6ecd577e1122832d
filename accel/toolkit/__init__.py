"""The plugin author's toolkit: read a vendor tool's text into accel's device model.

``accel.toolkit`` is the public, versioned face of the parsers and the plugin shape every
in-tree CLI backend uses (their private home is ``accel.plugins._cli``).  Write an out-of-tree
plugin against this module, :mod:`accel.plugin` and :mod:`accel.model` only; the guide is
``docs/guides/plugin-toolkit.md``.

**Stability promise** (:data:`TOOLKIT_API_VERSION`, ``major.minor``): every name in
``__all__`` keeps its signature and meaning within a major version; a new name or a new
keyword argument with a default bumps the minor; a removal or an incompatible change bumps the
major.  Modules and names starting with ``_`` (``accel.plugins._cli._tables``...) may change
at any time.  Check it where you depend on a minor's additions::

    from accel.toolkit import TOOLKIT_API_VERSION
    assert tuple(map(int, TOOLKIT_API_VERSION.split("."))) >= (1, 0)

The pieces, in the order a plugin uses them:

* the plugin shape: :class:`LazyCliPlugin` (the light entry-point object) with
  :func:`cli_plugin_info` and :class:`CliProbeSpec`, over a :class:`ToolBackend` subclass
  whose ``collect(col)`` reads the tool through a :class:`Collection` and returns
  ``col.snapshot(...)``; :class:`UnitReading` is one device as the tool prints it;
* text: :class:`ParseContext` (typed, located :class:`~accel.errors.ParseError`),
  :func:`split_lines`, :class:`SourceLine`;
* tables: :func:`find_box_tables` (``+---+`` boxes), :func:`find_aligned_table`,
  :func:`parse_kv` (``Key : Value``), :func:`parse_query_csv` (``--format=csv``),
  :func:`parse_listing` (``-L``), :func:`parse_process_rows`, :func:`read_matrix`;
  :func:`read_records` reads one device per record so one bad record hides no other;
* values: :func:`clean` and :func:`is_placeholder` (``N/A`` ...), :func:`is_sentinel`
  (``65535``), :func:`parse_bytes`, :func:`parse_used_total`, :func:`parse_watts`,
  :func:`parse_power_pair`, :func:`parse_celsius`, :func:`parse_hertz`, :func:`parse_ratio`,
  :func:`parse_int`, :func:`parse_float`, :func:`parse_bus_id`; :class:`Lenient` turns a bad
  value into a condition instead of losing the device;
* bindings: :func:`visible_binding` by any key the vendor's visibility variable takes;
* replay: :class:`ReplayScenario`, :func:`scenario_names`, :func:`scenario_path` (scenarios
  live in ``<package>/scenarios/<name>/``).

The toolkit never imports the conformance kit; a plugin's ``conformance`` module does.
"""

from __future__ import annotations

from typing import Final

from accel.plugins._cli import (
    BASE_CAPABILITIES,
    NEVER_READ,
    PLACEHOLDERS,
    TABLE_NEVER_PRINTS,
    AlignedTable,
    BoxRecord,
    BoxRow,
    BoxTable,
    CliProbeSpec,
    Collection,
    KVEntry,
    KVSection,
    LazyCliPlugin,
    Lenient,
    Listed,
    Matrix,
    ParseContext,
    PartitionsSurface,
    ProcessesSurface,
    ProcessRow,
    QueryColumn,
    QueryRow,
    QueryTable,
    ReplayScenario,
    Snapshot,
    SourceLine,
    ToolBackend,
    UnitReading,
    clean,
    cli_plugin_info,
    condition,
    find_aligned_table,
    find_box_tables,
    is_masked,
    is_placeholder,
    is_sentinel,
    memory_condition,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_float,
    parse_hertz,
    parse_int,
    parse_kv,
    parse_listing,
    parse_power_pair,
    parse_process_rows,
    parse_query_csv,
    parse_ratio,
    parse_used_total,
    parse_watts,
    probe_cli,
    processes_of,
    read_matrix,
    read_records,
    runner_for,
    scenario_names,
    scenario_path,
    select_table,
    split_lines,
    topo_links,
    visible_binding,
)

#: The toolkit's API version, ``major.minor`` (see the stability promise above).
TOOLKIT_API_VERSION: Final = "1.0"

__all__ = [
    "BASE_CAPABILITIES",
    "NEVER_READ",
    "PLACEHOLDERS",
    "TABLE_NEVER_PRINTS",
    "TOOLKIT_API_VERSION",
    "AlignedTable",
    "BoxRecord",
    "BoxRow",
    "BoxTable",
    "CliProbeSpec",
    "Collection",
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
    "ReplayScenario",
    "Snapshot",
    "SourceLine",
    "ToolBackend",
    "UnitReading",
    "clean",
    "cli_plugin_info",
    "condition",
    "find_aligned_table",
    "find_box_tables",
    "is_masked",
    "is_placeholder",
    "is_sentinel",
    "memory_condition",
    "parse_bus_id",
    "parse_bytes",
    "parse_celsius",
    "parse_float",
    "parse_hertz",
    "parse_int",
    "parse_kv",
    "parse_listing",
    "parse_power_pair",
    "parse_process_rows",
    "parse_query_csv",
    "parse_ratio",
    "parse_used_total",
    "parse_watts",
    "probe_cli",
    "processes_of",
    "read_matrix",
    "read_records",
    "runner_for",
    "scenario_names",
    "scenario_path",
    "select_table",
    "split_lines",
    "topo_links",
    "visible_binding",
]
