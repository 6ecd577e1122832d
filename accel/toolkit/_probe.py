"""The cheap, never-raising probe every CLI vendor shares: PCI ids, device nodes, the tool."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

from accel import tools
from accel.plugin import BackendConfig, ProbeResult
from accel.sysfs import scan_pci

from ._scenario import scenario_names

__all__ = ["CliProbeSpec", "probe_cli"]


@dataclass(frozen=True)
class CliProbeSpec:
    """What to look for, in order, when probing a CLI-based vendor.

    :param vendor: the vendor's name, for messages.
    :param pci_vendor_ids: PCI vendor ids (``"19e5"``) under ``/sys/bus/pci/devices``.
    :param pci_class_prefixes: accepted PCI class prefixes (``"12"`` processing accelerator);
        empty accepts every class.  A Huawei iBMC VGA function (class ``0300``) shares vendor
        id ``19e5`` with Ascend NPUs; listing ``"12"`` keeps it out.
    :param device_globs: device-node patterns relative to ``dev_root`` (``"davinci[0-9]*"``).
    :param tool: the CLI's name (``"npu-smi"``).
    :param tool_paths: absolute directories searched before ``PATH``.
    """

    vendor: str
    pci_vendor_ids: tuple[str, ...]
    tool: str
    pci_class_prefixes: tuple[str, ...] = ()
    device_globs: tuple[str, ...] = ()
    tool_paths: tuple[str, ...] = ()


def probe_cli(spec: CliProbeSpec, config: BackendConfig, *, package: str | None = None) -> ProbeResult:
    """Probe in the order sysfs PCI ids -> device nodes -> tool; never raises.

    With ``config.runner`` set (a replay scenario), the tool step asks the runner's ``which``,
    so a recorded host probes present on a machine without the hardware.  With ``package``
    given and ``options["scenario"]`` naming one of its shipped scenarios (and no runner), the
    probe answers present for that scenario (an unknown name is an error result).
    """
    try:
        name = config.option("scenario")
        if package is not None and name and config.runner is None:
            names = scenario_names(package)
            if str(name) in names:
                return ProbeResult.present(f"replay scenario {name!r} of {package}")
            return ProbeResult.error(
                f"unknown replay scenario {name!r}; shipped: {', '.join(names) or 'none'}", bad_config=True
            )
        return _probe(spec, config)
    except Exception as exc:  # noqa: BLE001 - probe() must never raise, whatever the host has
        return ProbeResult.error(f"{spec.vendor} probe failed: {type(exc).__name__}: {exc}")


def _probe(spec: CliProbeSpec, config: BackendConfig) -> ProbeResult:
    notes: list[str] = []
    all_vendor = scan_pci(config.sysfs_root, vendor_ids=spec.pci_vendor_ids)
    accepted = [
        fn
        for fn in all_vendor
        if not spec.pci_class_prefixes or (fn.class_code or "").startswith(spec.pci_class_prefixes)
    ]
    ids = "/".join(spec.pci_vendor_ids)
    if accepted:
        classes = ",".join(sorted({fn.class_code or "?" for fn in accepted}))
        return ProbeResult.present(
            f"{len(accepted)} PCI function(s) with vendor id {ids} (class {classes}) in sysfs",
            device_count=len(accepted),
        )
    if all_vendor:
        notes.append(
            f"ignored {len(all_vendor)} PCI function(s) with vendor id {ids} of class "
            f"{','.join(sorted({fn.class_code or '?' for fn in all_vendor}))} (not an accelerator)"
        )
    nodes: list[str] = []
    for pattern in spec.device_globs:
        nodes.extend(glob.glob(os.path.join(glob.escape(str(config.dev_root)), pattern)))
    if nodes:
        return ProbeResult.present(
            f"{len(nodes)} device node(s) {', '.join(sorted(os.path.basename(n) for n in nodes)[:8])}"
            f" under {config.dev_root}" + (f"; {notes[0]}" if notes else ""),
            device_count=len(nodes),
        )
    finder = config.runner.which if config.runner is not None else tools.which
    path = finder(spec.tool, spec.tool_paths)
    if path is not None:
        return ProbeResult.present(f"{spec.tool} found at {path}" + (f"; {notes[0]}" if notes else ""))
    checked = (
        f"no PCI vendor id {ids} in {config.sysfs_root}, no {'/'.join(spec.device_globs) or 'device nodes'} "
        f"under {config.dev_root}, no {spec.tool} in {list(spec.tool_paths)} or PATH"
    )
    return ProbeResult.absent("; ".join([checked, *notes]))
