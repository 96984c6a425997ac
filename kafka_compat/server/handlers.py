"""Importing this module registers every request handler (see registry.py)."""
from . import api_versions, fetch, metadata, offsets, produce  # noqa: F401
from . import admin, configs  # noqa: F401  (admin APIs; DescribeConfigs/AlterConfigs)
from . import groups  # noqa: F401  (FindCoordinator, the classic group protocol, offsets, group admin)
