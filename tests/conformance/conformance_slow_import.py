"""A plugin module that is heavy to import: it sleeps 3 s and starts a thread at module level.

The kit's fake breakage ``import-slow-thread`` (see ``conformance_fake.BREAKS``): it loads no
vendor library, so a name denylist certifies it, but every ``accel`` import that discovers it
would wait 3 s and leave a thread running.  ``discovery.entry-point-light`` must fail on it.
"""

from __future__ import annotations

import threading
import time

from tests.conformance.conformance_fake import FakePlugin

#: How long the import takes on purpose (the row's default budget is 1 s).
IMPORT_SLEEP_S = 3.0

time.sleep(IMPORT_SLEEP_S)  # stands for a vendor SDK initialising its driver at import
_stop = threading.Event()
_WATCHDOG = threading.Thread(target=_stop.wait, name="acme-watchdog", daemon=True)
_WATCHDOG.start()


class SlowImportPlugin(FakePlugin):
    """The fake, correct in every other respect."""


PLUGIN = SlowImportPlugin()
