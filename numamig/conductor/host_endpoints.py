"""The conductor's endpoints about hosts, mixed into its manager.

Forgetting a host, claim healing, a host's domains and usage, virtio-mem
memory changes, maintenance and drain plans: the operator's calls that
numamig.conductor.rpcapi_hosts sends, kept beside the manager so that
its migration paths stay readable. Each delegates to the module that
does the work.
"""

import oslo_messaging as messaging

from numamig import exception
from numamig import wire
from numamig.conductor import drain
from numamig.conductor import maintenance
from numamig.conductor.tasks import memory

# The errors the conductor's endpoints answer with as themselves (the
# manager's and these).
EXPECTED = (exception.MigrationError, exception.Invalid,
             exception.NotFound, exception.ConcurrentUpdate,
             exception.InstanceBuildError)


class HostEndpoints:
    """The manager sets ``worker``."""

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*EXPECTED)
    def compute_node_delete(self, ctxt, host):
        """Forget a host that no longer runs numamig.

        Idempotent: a repeat finds no record and answers False.
        """
        return maintenance.delete_host(self.worker, host)

    @wire.args(dry_run=wire.BOOL)
    @messaging.expected_exceptions(*EXPECTED)
    def heal_claims(self, ctxt, dry_run=False):
        """Find, and unless ``dry_run`` release, leaked claims.

        Idempotent: a repeat finds no leaked claim left and releases
        nothing.
        """
        return maintenance.heal_claims(self.worker, ctxt, dry_run=dry_run)

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*EXPECTED)
    def host_domains(self, ctxt, host):
        """Every domain of ``host`` with its XML.

        Idempotent: a repeat reads only and gets the same answer.
        """
        return maintenance.host_domains(self.worker, ctxt, host)

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*EXPECTED)
    def host_refresh_usage(self, ctxt, host):
        """Have ``host`` recompute its usage from the records and report.

        Idempotent: a repeat recomputes the same usage from the same
        records.
        """
        return maintenance.refresh_usage(self.worker, ctxt, host)

    @wire.args(change_uuid=wire.UUID, instance_uuid=wire.UUID,
               node=wire.integer(0, memory.MAX_NODE),
               size_mb=wire.integer(0, memory.MAX_SIZE_MB),
               exact=wire.BOOL, dry_run=wire.BOOL)
    @messaging.expected_exceptions(*EXPECTED, exception.HypervisorError)
    def instance_memory_set(self, ctxt, change_uuid, instance_uuid, node,
                            size_mb, exact, dry_run):
        """Set a guest's plugged virtio-mem memory, node ``node`` first
        (API 1.11; see conductor.tasks.memory).

        Idempotent: a repeat of ``change_uuid`` gets the recorded change.
        """
        return memory.SetInstanceMemoryTask(
            ctxt, self.worker, change_uuid, instance_uuid, node, size_mb,
            exact, dry_run, self.worker.settings.virtio_mem).execute()

    @wire.args(change_uuid=wire.UUID, host=wire.HOST,
               node=wire.integer(0, memory.MAX_NODE),
               size_mb=wire.integer(1, memory.MAX_SIZE_MB),
               exact=wire.BOOL, dry_run=wire.BOOL)
    @messaging.expected_exceptions(*EXPECTED, exception.HypervisorError)
    def host_reclaim(self, ctxt, change_uuid, host, node, size_mb, exact,
                     dry_run):
        """Free ``size_mb`` MiB on host node ``node`` from the host's
        guests (API 1.11; see conductor.tasks.memory).

        Idempotent: a repeat of ``change_uuid`` gets the recorded change.
        """
        return memory.HostReclaimTask(
            ctxt, self.worker, change_uuid, host, node, size_mb, exact,
            dry_run, self.worker.settings.virtio_mem).execute()

    @wire.args(host=wire.HOST, disabled=wire.BOOL,
               reason=wire.text(drain.REASON_LENGTH).or_none())
    @messaging.expected_exceptions(*EXPECTED)
    def host_set_disabled(self, ctxt, host, disabled, reason=None):
        """Disable a host for maintenance (API 1.8), or enable it.

        Idempotent: a repeat leaves the same state (a disabled host keeps
        since when it is disabled).
        """
        return drain.set_disabled(self.worker, host, disabled, reason)

    @wire.args(host=wire.HOST,
               to=wire.host_list(drain.MAX_DESTINATIONS).or_none(),
               keep_free_nodes=wire.integer(0, drain.MAX_KEEP_FREE))
    @messaging.expected_exceptions(*EXPECTED)
    def host_drain_plan(self, ctxt, host, to=None, keep_free_nodes=0):
        """Where every guest of ``host`` would go, at once (API 1.8).

        Idempotent: a repeat reads only and gets the same plan; nothing
        is recorded, reserved or claimed.
        """
        return drain.plan(self.worker, host, to=to,
                          keep_free_nodes=keep_free_nodes)
