"""The conductor client's calls about hosts, mixed into ConductorAPI.

Forgetting a host, recomputing its usage, maintenance and drain plans,
virtio-mem memory changes, claim healing and a host's domains: apart
from numamig.conductor.rpcapi so that the client stays one readable
module. Each call that needs a newer API than 1.0 is refused clearly
(one Invalid line) when ``[upgrade_levels] conductor`` or the conductor
is older.
"""

from numamig.conductor.api_versions import RELEASE_2


class HostCalls:
    """Needs ``_since`` and ``_operation`` of ConductorAPI."""

    def compute_node_delete(self, ctxt, host):
        """Forget a host that no longer runs numamig; idempotent.

        :returns: False if the host was not recorded (nothing to do).
        :raises HostInUse: it still reports, or records still use it.
        :raises Invalid: the conductor (or a cap) is older than 1.4.
        """
        return self._since(ctxt, 'compute_node_delete', RELEASE_2,
                           "deleting a host", host=host)

    def host_refresh_usage(self, ctxt, host, timeout=None):
        """Have ``host`` recompute its usage from the records and report.

        :returns: the ComputeNodeReport the host sent.
        :raises Invalid: the conductor (or a cap) is older than 1.6, or
            the host's agent (or its cap) of release 1 (compute API 1.0).
        :raises HostNotFound: ``host`` never reported.
        """
        return self._since(ctxt, 'host_refresh_usage', RELEASE_2,
                           "recomputing a host's usage", timeout=timeout,
                           host=host)

    def host_set_disabled(self, ctxt, host, disabled, reason=None):
        """Disable ``host`` for maintenance with ``reason``, or enable
        it; idempotent.

        :returns: {'host', 'disabled', 'disabled_at', 'reason'}.
        :raises HostNotFound: ``host`` never reported.
        :raises Invalid: the conductor (or a cap) is older than 1.8.
        """
        what = "disabling a host" if disabled else "enabling a host"
        return self._since(ctxt, 'host_set_disabled', RELEASE_2,
                           what, host=host, disabled=disabled,
                           reason=reason)

    def host_drain_plan(self, ctxt, host, to=None, keep_free_nodes=0,
                        timeout=None):
        """Where every guest of ``host`` would go, at once; nothing
        moves.

        :param to: host names the destinations are chosen among, or None.
        :param keep_free_nodes: whole NUMA cells to leave free on each
            destination.
        :returns: the plan (see numamig.conductor.drain.plan).
        :raises HostNotFound: ``host`` or a host of ``to`` never reported.
        :raises Invalid: the conductor (or a cap) is older than 1.8.
        """
        return self._since(ctxt, 'host_drain_plan', RELEASE_2,
                           "planning a drain", timeout=timeout, host=host,
                           to=None if to is None else list(to),
                           keep_free_nodes=keep_free_nodes)

    def instance_memory_set(self, ctxt, change_uuid, instance_uuid, node,
                            size_mb, exact=False, dry_run=False,
                            timeout=None):
        """Set a guest's plugged virtio-mem memory to ``size_mb``, host
        node ``node`` first (only there with ``exact``).

        :returns: the change's record: {'uuid', 'host', 'status',
            'request', 'plan', 'result'}.
        :raises InvalidMemoryChange, InstanceNotFound, HypervisorError.
        :raises Invalid: the conductor (or a cap) is of release 1.
        """
        return self._since(ctxt, 'instance_memory_set', RELEASE_2,
                           "changing a guest's memory", timeout=timeout,
                           change_uuid=change_uuid,
                           instance_uuid=instance_uuid, node=node,
                           size_mb=size_mb, exact=exact, dry_run=dry_run)

    def host_reclaim(self, ctxt, change_uuid, host, node, size_mb,
                     exact=False, dry_run=False, timeout=None):
        """Free ``size_mb`` MiB on ``host``'s node ``node`` from its
        guests' virtio-mem devices (elsewhere too without ``exact``).

        :returns: the change's record (as instance_memory_set).
        :raises InvalidMemoryChange, HostNotFound, HypervisorError.
        :raises Invalid: the conductor (or a cap) is of release 1.
        """
        return self._since(ctxt, 'host_reclaim', RELEASE_2,
                           "reclaiming memory on a host", timeout=timeout,
                           change_uuid=change_uuid, host=host, node=node,
                           size_mb=size_mb, exact=exact, dry_run=dry_run)

    def heal_claims(self, ctxt, dry_run=False):
        """Find (and unless ``dry_run`` release) leaked claims.

        :returns: {'found': [...], 'released': [...], 'skipped': [...]},
            each a list of audit Finding dicts.
        """
        return self._operation(ctxt, 'heal_claims', dry_run=dry_run)

    def host_domains(self, ctxt, host, timeout=None):
        """Every domain on ``host`` with its live and persistent XML.

        :returns: see ComputeAPI.list_domains.
        """
        return self._operation(ctxt, 'host_domains', timeout=timeout,
                               host=host)
