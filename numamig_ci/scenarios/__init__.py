"""The harness's scenarios, each selectable by name.

Importing this package registers every scenario module; ``registry``
holds the table, in the order below: ``pinning`` (CPU placement),
``memory`` (huge pages and nodes), ``lifecycle`` (persistence, rollback,
abort, refusal, concurrency).
"""

from numamig_ci.scenarios import pinning  # noqa: F401,I001
from numamig_ci.scenarios import memory  # noqa: F401
from numamig_ci.scenarios import lifecycle  # noqa: F401
