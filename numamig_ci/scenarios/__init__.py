"""The harness's scenarios, each selectable by name.

Importing this package registers every scenario module; ``registry``
holds the table, in the order below: ``pinning`` (CPU placement),
``memory`` (huge pages and nodes), ``lifecycle`` (persistence, rollback,
refusal, concurrency), ``abort`` (an operator's abort at each moment a
backend can hold a migration), ``upgrade`` (an old-release source into
the destination's migration guard), ``drain`` (a host drained through
the conductor), ``postcopy`` (a post-copy whose link is cut, resumed
from the command line), ``convergence`` (policies acting on a real job
that cannot converge by itself), ``threads`` (where a migration's own
QEMU threads run, read from the kernel), ``virtio_mem`` (a guest
kernel's virtio-mem memory per host node, grown and reclaimed from the
command line), ``cpu_models`` (CPU models between hosts of two CPU
generations), ``cpu_power`` (CPU power management across a migration,
read from the kernel), ``devices`` (a guest's passed-through PCI
function unplugged before the copy, the destination's plugged after),
``device_stuck`` (a guest that does not release its device in time).
"""

from numamig_ci.scenarios import pinning  # noqa: F401,I001
from numamig_ci.scenarios import memory  # noqa: F401
from numamig_ci.scenarios import lifecycle  # noqa: F401
from numamig_ci.scenarios import abort  # noqa: F401
from numamig_ci.scenarios import upgrade  # noqa: F401
from numamig_ci.scenarios import drain  # noqa: F401
from numamig_ci.scenarios import postcopy  # noqa: F401
from numamig_ci.scenarios import convergence  # noqa: F401
from numamig_ci.scenarios import threads  # noqa: F401
from numamig_ci.scenarios import virtio_mem  # noqa: F401
from numamig_ci.scenarios import cpu_models  # noqa: F401
from numamig_ci.scenarios import cpu_power  # noqa: F401
from numamig_ci.scenarios import locality  # noqa: F401
from numamig_ci.scenarios import distances  # noqa: F401
from numamig_ci.scenarios import devices  # noqa: F401
from numamig_ci.scenarios import device_stuck  # noqa: F401
