"""In-tree vendor backends, one sub-package per vendor (``accel.plugins.<vendor>``).

Each sub-package's ``__init__`` defines ``PLUGIN``, a light :class:`accel.plugin.BackendPlugin`
that imports no vendor library; the vendor library is loaded in ``PLUGIN.open()``.
"""
