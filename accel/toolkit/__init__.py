"""The plugin author's toolkit: read a vendor tool's text into accel's device model.

``accel.toolkit`` is the public, versioned API every CLI backend is written against: the
in-tree plugins (``accel.plugins.ascend``, ``cambricon``, ...) import it exactly as an
out-of-tree one does.  Write a plugin against this module, :mod:`accel.plugin` and
:mod:`accel.model` only; the guide is ``docs/guides/plugin-toolkit.md``.  Its code lives in the
``_``-modules of this package (``_tables``, ``_values``, ``_tool``, ...), which may change at
any time; :mod:`accel.toolkit.testing` registers a plugin's shipped replays with the
conformance kit (only a plugin's ``conformance`` module imports it).

**Stability promise** (:data:`TOOLKIT_API_VERSION`, ``major.minor``): every name in
``__all__`` keeps its signature and meaning within a major version; a new name or a new
keyword argument with a default bumps the minor; a removal or an incompatible change bumps the
major.  Modules and names starting with ``_`` (``accel.toolkit._tables``...) may change at any
time.  Check it where you depend on a minor's additions::

    from accel.toolkit import TOOLKIT_API_VERSION
    assert tuple(map(int, TOOLKIT_API_VERSION.split("."))) >= (1, 1)

The pieces, in the order a plugin uses them:

* the plugin shape: :class:`LazyCliPlugin` (the light entry-point object) with
  :func:`cli_plugin_info` and :class:`CliProbeSpec`, over a :class:`ToolBackend` subclass
  whose ``collect(col)`` reads the tool through a :class:`Collection` and returns
  ``col.snapshot(...)``; :class:`UnitReading` is one device as the tool prints it, a
  :class:`ToolView` what one view of the tool printed, :func:`merge_readings` fills one view's
  gaps from another; :class:`ToolSession` runs a second tool with the backend's timeout;
* text: :class:`ParseContext` (typed, located :class:`~accel.errors.ParseError`),
  :func:`split_lines`, :class:`SourceLine`, :func:`first_line`, :func:`first_match`;
* tables: :func:`find_box_tables` (``+---+`` boxes), :func:`find_aligned_table`,
  :func:`parse_kv` (``Key : Value``), :func:`parse_query_csv` (``--format=csv``),
  :func:`parse_listing` (``-L``), :func:`parse_process_rows`, :func:`read_matrix`,
  :func:`select_table`, :func:`title_match`; :func:`read_records` reads one device per record so
  one bad record hides no other (:func:`identify_text` names the device a bad record was);
  :func:`read_header_records`, :func:`table_under_header`, :class:`RecordReader` and
  :func:`is_rule` read tables the box reader cannot frame (no outer border, doubled rules);
* values: :func:`clean` and :func:`is_placeholder` (``N/A`` ...), :func:`is_sentinel`
  (``65535``), :func:`parse_bytes`, :func:`parse_used_total`, :func:`parse_watts`,
  :func:`parse_power_pair`, :func:`parse_celsius`, :func:`parse_hertz`, :func:`parse_ratio`,
  :func:`parse_int`, :func:`parse_float`, :func:`parse_bus_id`; :class:`Lenient` turns a bad
  value into a condition instead of losing the device; :func:`bounded` and
  :func:`out_of_bounds_errors` hold a reading to the model's physical bounds;
* links: :func:`topo_links`, :func:`matrix_links` and :func:`link_domains` turn a ``topo -m``
  matrix into typed links and domains;
* bindings: :func:`visible_binding` by any key the vendor's visibility variable takes;
* assembly (shared with the NVIDIA and AMD backends): a :class:`DeviceReading` is the model's
  own classes built with ``model_construct`` (typed, not validated yet) plus the fields the
  backend can ``never`` read; :func:`assemble_device` validates it once, lists never-readable
  fields still empty as ``unsupported`` and reports out-of-bounds values as "not read this
  time"; :func:`unsupported_of` is that rule alone (for telemetry samples);
* native libraries (1.3): :func:`load_library` (environment override, then the vendor's
  standard locations, a typed error naming every path tried), a :class:`SignatureTable` of
  :class:`NativeFunction` rows with their :class:`SignatureSource`, an :class:`ErrorTable` from
  return codes to typed errors, :func:`versioned` / :func:`struct_version` structs, and
  :class:`NativeLibrary`, which calls under a deadline; :class:`FakeLibrary` (with
  :func:`deref`, :func:`set_out`, :func:`fake_functions`) fakes a library for tests and
  :func:`signature_problems` checks calls and fakes against the table;
* two read paths (1.4): :class:`DualPathBackend` (with :class:`NativeEventsSurface` where the
  library has events) reads the library when
  :func:`choose_read_path` picks it (``-o read=native|cli|auto``, :func:`read_mode`), the CLI
  otherwise, and records the path in the source (:func:`path_note`); over a replay the native
  path reads the plugin's fake of it, with the scenario's :data:`NATIVE_STATE_FILE`
  (:func:`read_native_state`); :mod:`accel.toolkit.testing` compares the two paths
  (``compare_paths``);
* replay: :class:`ReplayScenario`, :func:`scenario_names`, :func:`scenario_path` (scenarios
  live in ``<package>/scenarios/<name>/``).

**Errors.**  Parsers raise :class:`accel.errors.ParseError` only.  Build them with
``ctx.error(message, line)``, or let a value helper raise a bare one inside
``with ctx.at(line):``, which adds tool, command and line.  Parse one device per ``try`` so one
bad row never hides the others.  A record that fails to parse is a typed problem of the
snapshot, and a device it still identifies (bus id, index) stays listed with health
``unknown``.  Under every table reader sits a census (applied by :class:`ToolBackend` after
``collect``): a PCI address a device list prints that no parsed unit has is a ``record``
problem and a listed device, so a chip whose record a mangled rule merged away is never
silently missing.

**Running.**  :func:`runner_for` picks ``config.runner``, else the shipped scenario named by
``options["scenario"]``, else the real runner.  A :class:`ToolBackend` remembers lost devices
and simulates faults over replays for the conformance kit.

The toolkit never imports the conformance kit; :mod:`accel.toolkit.testing` does, and only a
plugin's ``conformance`` module imports that.
"""

from __future__ import annotations

from typing import Final

from ._assembly import DeviceReading, assemble_device, out_of_bounds_errors, unsupported_of
from ._csv import QueryColumn, QueryRow, QueryTable, parse_query_csv
from ._kv import KVEntry, KVSection, parse_kv
from ._listing import Listed, ProcessRow, parse_listing, parse_process_rows, processes_of
from ._matrix import Matrix, first_line, read_matrix, read_records, select_table, title_match
from ._native import (
    ErrorTable,
    NativeCalls,
    NativeFunction,
    NativeLibrary,
    SignatureSource,
    SignatureTable,
    library_candidates,
    load_library,
    signature_problems,
    struct_version,
    versioned,
)
from ._native_backend import DualPathBackend, NativeEventsSurface
from ._native_fake import FakeLibrary, deref, fake_functions, set_out
from ._native_path import (
    NATIVE_STATE_FILE,
    READ_MODES,
    READ_OPTION,
    ReadChoice,
    choose_read_path,
    path_note,
    read_mode,
    read_native_state,
    scenario_state_file,
)
from ._plugin import BASE_CAPABILITIES, LazyCliPlugin, cli_plugin_info
from ._probe import CliProbeSpec, probe_cli
from ._problems import identify_text
from ._records import (
    Lenient,
    RecordReader,
    condition,
    first_match,
    is_rule,
    read_header_records,
    table_under_header,
)
from ._scenario import ReplayScenario, scenario_names, scenario_path
from ._session import ToolSession, runner_for
from ._snapshot import PartitionsSurface, ProcessesSurface, Snapshot
from ._tables import AlignedTable, BoxRecord, BoxRow, BoxTable, find_aligned_table, find_box_tables
from ._text import ParseContext, SourceLine, split_lines
from ._tool import Collection, ToolBackend, ToolView
from ._topo import PCIE_CODES, link_domains, matrix_links, topo_links
from ._unit import (
    NEVER_READ,
    TABLE_NEVER_PRINTS,
    UnitReading,
    bounded,
    memory_condition,
    merge_readings,
    visible_binding,
)
from ._values import (
    PLACEHOLDERS,
    clean,
    is_masked,
    is_placeholder,
    is_sentinel,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_float,
    parse_hertz,
    parse_int,
    parse_power_pair,
    parse_ratio,
    parse_used_total,
    parse_watts,
)

#: The toolkit's API version, ``major.minor`` (see the stability promise above).
TOOLKIT_API_VERSION: Final = "1.4"

#: Public classes that keep the ``_``-module they are defined in as ``__module__``: their
#: annotations name types this namespace does not hold (``Mapping``, ``Device``, ``ClassVar``...),
#: and ``typing.get_type_hints`` (which pydantic uses on a dataclass) resolves them there.
_KEEP_MODULE: Final = frozenset(
    {"AlignedTable", "BoxRow", "DeviceReading", "DualPathBackend", "ErrorTable", "FakeLibrary", "LazyCliPlugin",
     "NativeFunction", "QueryRow", "ReadChoice", "SignatureTable", "Snapshot", "ToolBackend", "ToolSession",
     "ToolView", "UnitReading"}
)

__all__ = [
    "BASE_CAPABILITIES",
    "NATIVE_STATE_FILE",
    "NEVER_READ",
    "PCIE_CODES",
    "PLACEHOLDERS",
    "READ_MODES",
    "READ_OPTION",
    "TABLE_NEVER_PRINTS",
    "TOOLKIT_API_VERSION",
    "AlignedTable",
    "BoxRecord",
    "BoxRow",
    "BoxTable",
    "CliProbeSpec",
    "Collection",
    "DeviceReading",
    "DualPathBackend",
    "ErrorTable",
    "FakeLibrary",
    "KVEntry",
    "KVSection",
    "LazyCliPlugin",
    "Lenient",
    "Listed",
    "Matrix",
    "NativeCalls",
    "NativeEventsSurface",
    "NativeFunction",
    "NativeLibrary",
    "ParseContext",
    "PartitionsSurface",
    "ProcessRow",
    "ProcessesSurface",
    "QueryColumn",
    "QueryRow",
    "QueryTable",
    "ReadChoice",
    "RecordReader",
    "ReplayScenario",
    "SignatureSource",
    "SignatureTable",
    "Snapshot",
    "SourceLine",
    "ToolBackend",
    "ToolSession",
    "ToolView",
    "UnitReading",
    "assemble_device",
    "bounded",
    "choose_read_path",
    "clean",
    "cli_plugin_info",
    "condition",
    "deref",
    "fake_functions",
    "find_aligned_table",
    "find_box_tables",
    "first_line",
    "first_match",
    "identify_text",
    "is_masked",
    "is_placeholder",
    "is_rule",
    "is_sentinel",
    "library_candidates",
    "link_domains",
    "load_library",
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
    "parse_power_pair",
    "parse_process_rows",
    "parse_query_csv",
    "parse_ratio",
    "parse_used_total",
    "parse_watts",
    "path_note",
    "probe_cli",
    "processes_of",
    "read_header_records",
    "read_matrix",
    "read_mode",
    "read_native_state",
    "read_records",
    "runner_for",
    "scenario_names",
    "scenario_path",
    "scenario_state_file",
    "select_table",
    "set_out",
    "signature_problems",
    "split_lines",
    "struct_version",
    "table_under_header",
    "title_match",
    "topo_links",
    "unsupported_of",
    "versioned",
    "visible_binding",
]

# Every other public class and function says it lives here, as httpx does: reprs, pickles and
# tracebacks name ``accel.toolkit.X``, the name the stability promise covers, not its private home.
for _name in __all__:
    _obj = globals()[_name]
    if _name not in _KEEP_MODULE and (isinstance(_obj, type) or callable(_obj)):
        _obj.__module__ = __name__
del _name, _obj
