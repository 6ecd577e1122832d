"""One serving replica of ``accel serve --sim``: accel's fake vLLM engine on a loopback port.

Started by the service (:mod:`._replicas`) as ``python -m accel.service._replica_main``, one
process per running replica job.  It binds ``127.0.0.1`` on a port the kernel picks (no race
for a port chosen in advance), then writes ``{"url", "pid"}`` to ``--ready-file`` (atomically:
the service reads the whole file or none), and serves until SIGTERM / SIGINT, or until its
parent (the service) is gone: a replica never outlives the service that placed it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

#: How often the replica checks that the service that started it still runs (seconds).
PARENT_CHECK_S = 0.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="accel-serving-replica")
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--model", default="llama-2-70b")
    parser.add_argument("--cost-model", default="llama-2-70b")
    parser.add_argument("--cost-device", default="h100-80gb")
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    args = parser.parse_args(argv)
    stop = threading.Event()

    def _terminate(signum: int, frame: FrameType | None) -> Any:
        stop.set()

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, _terminate)
    if os.getppid() != args.parent_pid:
        return 1  # the service died before we started

    from accel.router._fake import FakeEngine, FakeEngineConfig
    from accel.router._serve import serve

    from .executors._wrap import write_json_atomic

    engine = FakeEngine(FakeEngineConfig(model=args.model, profile_model=args.cost_model,
                                         profile_device=args.cost_device, time_scale=args.time_scale,
                                         max_num_seqs=args.max_num_seqs))
    try:
        server = serve(engine.app(), listen="127.0.0.1", port=0, name="accel-serving-replica").start()
    except OSError as exc:
        engine.close()
        print(f"accel serving replica: cannot listen: {exc}", file=sys.stderr, flush=True)
        return 1
    try:
        url = f"http://127.0.0.1:{server.port}"
        write_json_atomic(Path(args.ready_file), {"url": url, "pid": os.getpid()})
        print(f"accel serving replica: {url} serving {args.model} (time scale {args.time_scale:g})",
              file=sys.stderr, flush=True)
        while not stop.wait(PARENT_CHECK_S):
            if os.getppid() != args.parent_pid:
                break  # the service is gone (killed): so is its replica
    finally:
        server.close()
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
