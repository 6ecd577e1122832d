"""The kit's own tests.

``example_plugin/`` is a plugin distribution the tests install or put on a child's path; its own
``tests/`` run inside that plugin's environment (``examples/accel-gaudi/ci.sh``), never here.
"""

collect_ignore = ["example_plugin"]
