"""A test-only pass for the sweep tests (``hlorun sweep --plugin
tests.sweep_plugin``): it misbehaves the way real compilers do, chosen by
the module's name, so one fixture directory holds a module of every
status.

* ``crash_*``: the task process dies at once (``os._exit``), as on a
  segfault in native code;
* ``hang_*``: the pass never returns (a time-limit case);
* ``kill_worker_*``: the pass kills the Dask worker process that runs the
  task (the machine's OOM killer, a preempted node);
* ``fail_*``: the pass refuses the module (a PassError).

Any other module passes through unchanged.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass

from hlorun.passes import REGISTRY
from hlorun.passes.base import Pass


@dataclass(frozen=True)
class SweepTestHook(Pass):
    name = "sweep-test-hook"

    def run(self, module) -> bool:
        name = module.name
        if name.startswith("crash_"):
            sys.stderr.write("sweep-test-hook: simulated native crash\n")
            sys.stderr.flush()
            os._exit(70)
        if name.startswith("hang_"):
            time.sleep(3600)
        if name.startswith("kill_worker_"):
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(60)
        if name.startswith("fail_"):
            self.fail(f"sweep-test-hook refuses modules named fail_* ({name})",
                      module.entry.root)
        return False


REGISTRY.setdefault("sweep-test-hook", f"{__name__}:SweepTestHook")
