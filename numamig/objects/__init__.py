"""numamig's versioned objects.

Importing this package registers every object class, so that the
serializer can rebuild any of them from the wire.
"""

from numamig.objects.base import NumamigObject  # noqa: F401
from numamig.objects.compute_node_report import ComputeNodeReport  # noqa
from numamig.objects.cpu_power import CPUPowerCell  # noqa: F401
from numamig.objects.cpu_power import CPUPowerState  # noqa: F401
from numamig.objects.host_cpu import HostCPU  # noqa: F401
from numamig.objects.host_cpu import InstanceCPU  # noqa: F401
from numamig.objects.host_numa import HostNUMACell  # noqa: F401
from numamig.objects.host_numa import HostNUMATopology  # noqa: F401
from numamig.objects.host_numa import NUMALimits  # noqa: F401
from numamig.objects.host_numa import NUMAPagesTopology  # noqa: F401
from numamig.objects.instance import Instance  # noqa: F401
from numamig.objects.instance_numa import InstanceNUMACell  # noqa: F401
from numamig.objects.instance_numa import InstanceNUMATopology  # noqa: F401
from numamig.objects.live_migrate_data import LiveMigrateData  # noqa: F401
from numamig.objects.locality import GuestLocality  # noqa: F401
from numamig.objects.locality import HostLocality  # noqa: F401
from numamig.objects.migrate_info import NUMAMigrateInfo  # noqa: F401
from numamig.objects.migration import Migration  # noqa: F401
from numamig.objects.migration import MigrationStatusChange  # noqa: F401
from numamig.objects.migration_context import MigrationContext  # noqa: F401
from numamig.objects.migration_satellites import MigrationConvergence  # noqa
from numamig.objects.migration_satellites import MigrationDevices  # noqa
from numamig.objects.migration_satellites import MigrationPrediction  # noqa
from numamig.objects.migration_satellites import MigrationReclaim  # noqa
from numamig.objects.migration_satellites import MigrationRecovery  # noqa
from numamig.objects.migration_satellites import MigrationThreads  # noqa
from numamig.objects.pci import HostPCIDevice  # noqa: F401
from numamig.objects.pci import InstancePCIDevice  # noqa: F401
from numamig.objects.pci import PCIRequest  # noqa: F401
