"""A base for the light entry-point object of a CLI vendor plugin."""

from __future__ import annotations

import abc
from typing import ClassVar

from accel.plugin import Backend, BackendConfig, BackendPlugin, ProbeResult
from accel.tools import Runner

from ._probe import CliProbeSpec, probe_cli
from ._session import runner_for

__all__ = ["CliBackendPlugin"]


class CliBackendPlugin(BackendPlugin):
    """Probe from :attr:`probe_spec`; open over :func:`runner_for` (real tool, ``--replay``
    runner or the shipped scenario named by ``options["scenario"]``).

    Subclasses set ``info``, ``probe_spec`` and ``package`` (the plugin package, whose
    ``scenarios/`` folder holds the replay scenarios) and implement :meth:`open_with`, which
    should import the heavy backend module lazily so the entry point stays light.
    """

    probe_spec: ClassVar[CliProbeSpec]
    package: ClassVar[str]

    def probe(self, config: BackendConfig) -> ProbeResult:
        return probe_cli(self.probe_spec, config, package=self.package)

    def open(self, config: BackendConfig) -> Backend:
        return self.open_with(config, runner_for(config, self.package))

    @abc.abstractmethod
    def open_with(self, config: BackendConfig, runner: Runner) -> Backend:
        """Open the backend over ``runner``."""
