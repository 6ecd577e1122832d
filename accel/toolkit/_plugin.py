"""The light entry-point object of a CLI vendor plugin and its :class:`PluginInfo`."""

from __future__ import annotations

import abc
import importlib
from collections.abc import Iterable
from typing import ClassVar

from accel.plugin import (
    PLUGIN_API,
    Backend,
    BackendConfig,
    BackendPlugin,
    Capability,
    PluginInfo,
    ProbeResult,
    check_options,
)
from accel.tools import Runner

from ._probe import CliProbeSpec, probe_cli
from ._session import runner_for

__all__ = ["BASE_CAPABILITIES", "CliBackendPlugin", "LazyCliPlugin", "cli_plugin_info"]


class CliBackendPlugin(BackendPlugin):
    """Probe from :attr:`probe_spec`; open over :func:`runner_for` (real tool, ``--replay``
    runner or the shipped scenario named by ``options["scenario"]``).

    Subclasses set ``info``, ``probe_spec`` and ``package`` (the plugin package, whose
    ``scenarios/`` folder holds the replay scenarios) and implement :meth:`open_with`, which
    should import the heavy backend module lazily so the entry point stays light.
    """

    probe_spec: ClassVar[CliProbeSpec]
    package: ClassVar[str]
    #: The ``--option`` names the backend reads; :meth:`open` refuses any other
    #: (:func:`~accel.plugin.check_options`).  A vendor adds its own to ``scenario``.
    known_options: ClassVar[frozenset[str]] = frozenset({"scenario"})

    def probe(self, config: BackendConfig) -> ProbeResult:
        return probe_cli(self.probe_spec, config, package=self.package)

    def open(self, config: BackendConfig) -> Backend:
        check_options(self.info.name, config, self.known_options)
        return self.open_with(config, runner_for(config, self.package))

    @abc.abstractmethod
    def open_with(self, config: BackendConfig, runner: Runner) -> Backend:
        """Open the backend over ``runner``."""


class LazyCliPlugin(CliBackendPlugin):
    """A :class:`~accel.toolkit.CliBackendPlugin` whose backend class is named, not imported:
    ``backend = "accel.plugins.metax._backend:MetaxBackend"`` is imported on :meth:`open` only,
    so the entry-point module stays light.  The class is built as ``cls(config, runner)``."""

    backend: ClassVar[str]

    def open_with(self, config: BackendConfig, runner: Runner) -> Backend:
        module, _, name = self.backend.partition(":")
        factory = getattr(importlib.import_module(module), name)
        backend: Backend = factory(config, runner)
        return backend


#: What every CLI backend built on this module reports (vendors add their own on top).
BASE_CAPABILITIES: frozenset[Capability] = frozenset(
    {
        Capability.INVENTORY,
        Capability.MEMORY,
        Capability.MEMORY_USED,
        Capability.PCI,
        Capability.HEALTH,
        Capability.TELEMETRY,
        Capability.TEMPERATURE,
        Capability.UTILIZATION,
        Capability.VERSIONS,
    }
)


def cli_plugin_info(
    name: str,
    *,
    api: str,
    description: str,
    capabilities: Iterable[Capability] = (),
    without: Iterable[Capability] = (),
    version: str = "0.1.0",
    vendor: str | None = None,
) -> PluginInfo:
    """The :class:`PluginInfo` of a CLI plugin: :data:`BASE_CAPABILITIES` plus ``capabilities``
    minus ``without``.  ``vendor`` is the lower-case vendor its devices report (``huawei`` for
    backend ``ascend``), the backend id when not given; the human name goes in ``description``."""
    caps = (BASE_CAPABILITIES | frozenset(capabilities)) - frozenset(without)
    return PluginInfo(
        name=name,
        vendor=vendor or name,
        version=version,
        api_versions=frozenset({PLUGIN_API}),
        api=api,
        description=description,
        capabilities=caps,
    )
