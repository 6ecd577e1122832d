"""The conformance suite: subclass it, name the backend, run pytest.

A vendor's whole test module::

    from accel.conformance import ConformanceSuite

    class TestAscend910B(ConformanceSuite):
        backend = "ascend"
        options = {"scenario": "910b-8"}

Every ``test_*`` method checks one requirement row (see ``requirements.json``).  A row gated on
a capability the plugin does not declare is skipped as *not applicable*; a row that needs an
oracle or a fault hook the suite does not have is skipped with that reason.  Known deviations go
in ``xfail = {"row.id": "why"}`` and are strict: a row that starts passing fails the run until
the entry is removed.  Overriding a ``test_*`` method is allowed but is reported as
*overridden*, never as passed.
"""

from __future__ import annotations

from ._cost import CostRows
from ._discovery import DiscoveryRows
from ._errors import ErrorsRows
from ._health import HealthRows
from ._helpers import NOT_APPLICABLE
from ._inventory import InventoryRows
from ._lifecycle import LifecycleRows
from ._memory import MemoryRows
from ._partitions import PartitionsRows
from ._telemetry import TelemetryRows
from ._topology import TopologyRows

__all__ = ["NOT_APPLICABLE", "ConformanceSuite"]


# pytest collects inherited tests base-first (reverse MRO), so the sections are listed last to
# first: the rows still run in requirements.json order, discovery first.
class ConformanceSuite(
    CostRows,
    LifecycleRows,
    ErrorsRows,
    TelemetryRows,
    HealthRows,
    PartitionsRows,
    TopologyRows,
    MemoryRows,
    InventoryRows,
    DiscoveryRows,
):
    """Base class of a backend's conformance tests.  Set :attr:`backend`; the rest is optional.

    When the plugin registers a scenario named by ``scenario`` / ``options['scenario']`` /
    ``options['profile']`` in its ``conformance.CONFORMANCE_SCENARIOS``, the class takes what it
    leaves unset from it (config, oracle, fault hooks, xfail, snapshot budget): see
    :meth:`adopt_plugin_scenario`.

    Class attributes:

    ``backend``
        The ``accel.backends`` entry-point name.
    ``options``
        Passed as :attr:`accel.plugin.BackendConfig.options` by the default :meth:`backend_config`.
    ``scenario``
        A short name for the matrix column (default: ``options['scenario']`` or ``['profile']``).
    ``plugin``
        A :class:`~accel.plugin.BackendPlugin` object to use instead of the entry point.
    ``oracle``
        An :class:`~accel.conformance.Oracle`: independent truth for the ``*oracle*`` rows.
    ``lose_device`` / ``make_health_unreadable``
        ``Callable[[Backend, str], None]`` fault hooks (plain functions); without them the suite
        uses the backend's :class:`~accel.conformance.FaultInjector` (or a backend method
        ``lose_device(device_id)``), then :meth:`faulted_config`, or skips the row.
    ``xfail``
        ``{"row.id": "reason"}``: known deviations, strict.
    ``snapshot_budget`` / ``probe_budget``
        The most tool runs or vendor calls one ``inventory()`` / ``probe()`` may cost.
    ``vendor_modules``
        Top-level modules the entry-point module and ``probe()`` must not import.
    ``import_budget_s`` / ``import_thread_budget`` / ``import_module_budget``
        What importing the entry-point module in a fresh interpreter may cost beyond
        ``accel.plugin``: wall seconds (1.0), threads started (0), modules added (100).
    """
