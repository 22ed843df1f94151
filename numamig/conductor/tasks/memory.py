"""The task of a virtio-mem memory change: plan, record, carry out,
record again.

``numamig-manage instance memory set`` (SetInstanceMemoryTask) and
``host reclaim`` (HostReclaimTask) end here.
Each change is planned by numa.reclaim from the records (the guests'
devices, the host's free memory per node as its last report says),
recorded under the client's uuid (a redelivered request gets the
recorded answer), then carried out guest by guest by the guest's agent
(compute API 1.5), each within ``[virtio_mem] resize_timeout``:

1. before asking, the instance record gets the new requested sizes: a
   growth is held on the host from then on, a shrink is not released
   (the host holds the larger of requested and current);
2. the agent answers what the guest really has plugged (``current``),
   in time or at the deadline; the record gets it: only then does a
   shrink free host memory, by what the guest released;
3. the host's agent recomputes its usage from the records.

A guest that does not answer (no driver, hung) keeps its old current
size: nothing is released for it and the answer says so.
"""

import abc

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig.conductor.tasks import base
from numamig.db import instances
from numamig.db import memory_changes
from numamig.numa import constraints
from numamig.numa import reclaim

LOG = logging.getLogger(__name__)

# The highest host NUMA node id a request may name (Linux's MAX_NUMNODES
# is 1024 on the largest configurations), and the largest size.
MAX_NODE = 1023
MAX_SIZE_MB = constraints.MAX_MEMORY_MB

# Extra seconds an RPC call waits beyond the guest's deadline (the agent
# answers at the deadline at the latest).
CALL_MARGIN_S = 10


class MemoryChangeTask(base.TaskBase):
    """One memory change: planned by a subclass (``_plan``), recorded
    under ``change_uuid``, carried out guest by guest, recorded again.

    The rollback records the change ``failed``, with the error, when
    carrying it out raised: each guest's record was already set back
    to what its agent answered (or restored when it refused before
    being asked), so what stays to undo is the change's own record,
    which would otherwise claim it is still under way.

    :param dry_run: plan only; nothing is recorded or asked.
    :param conf: the worker's VirtioMemSettings (``[virtio_mem]``).
    """

    def __init__(self, ctxt, worker, change_uuid, dry_run, conf):
        super().__init__(ctxt, worker)
        self.change_uuid = change_uuid
        self.dry_run = dry_run
        self.conf = conf
        # The plan, while the recorded change is being carried out.
        self._carrying = None

    @abc.abstractmethod
    def _plan(self):
        """(host, request, numa.reclaim Plan) of the change; raises to
        refuse it, before anything is recorded."""

    def _execute(self):
        """:returns: the change's record ('status', 'plan', 'result')."""
        worker, change_uuid = self.worker, self.change_uuid
        host, request, plan = self._plan()
        _refuse_if_nothing_changes(host, request, plan)
        if self.dry_run:
            return {'uuid': change_uuid, 'host': host, 'status': 'planned',
                    'request': request, 'plan': plan.as_dict(),
                    'result': None}
        recorded = memory_changes.get(worker.db, change_uuid)
        if recorded is not None:  # delivered again: the recorded answer
            return recorded
        # An agent that stopped reporting would hold the caller for each
        # guest's resize_timeout, and the change would end failed anyway.
        worker.cache.check_up(host)
        row, created = memory_changes.start(worker.db, change_uuid, host,
                                            request)
        if not created:
            return row
        self._carrying = plan
        result = carry_out(worker, self.ctxt, host, plan, self.conf)
        self._carrying = None
        return memory_changes.finish(worker.db, change_uuid,
                                     _status(result), plan.as_dict(),
                                     result)

    def rollback(self, exc):
        plan, self._carrying = self._carrying, None
        # Only an error is recorded: a thread torn down (not an
        # Exception) leaves the change as it was recorded, started.
        if plan is not None and isinstance(exc, Exception):
            memory_changes.finish(self.worker.db, self.change_uuid,
                                  memory_changes.FAILED, plan.as_dict(),
                                  {'error': exception.brief(exc)})


class SetInstanceMemoryTask(MemoryChangeTask):
    """Set a guest's plugged device memory to ``size_mb``, taken from or
    given to host node ``node`` first (the seed's mem-set -n [-e]).

    :raises InstanceNotFound, InvalidMemoryChange.
    """

    def __init__(self, ctxt, worker, change_uuid, instance_uuid, node,
                 size_mb, exact, dry_run, conf):
        super().__init__(ctxt, worker, change_uuid, dry_run, conf)
        self.instance_uuid = instance_uuid
        self.node = node
        self.size_mb = size_mb
        self.exact = exact

    def _plan(self):
        worker = self.worker
        instance = instances.get(worker.db, self.instance_uuid).instance
        host = _host_of(instance)
        _check_node(worker, host, self.node)
        request = {'instance': self.instance_uuid, 'node': self.node,
                   'size_mb': self.size_mb, 'exact': self.exact}
        plan = reclaim.plan_guest(
            reclaim.devices_of(self.instance_uuid, instance.numa_topology),
            self.node, self.size_mb, self.exact,
            free_mb=_free_mb(worker, host),
            max_loss_mb=self.conf.max_loss_mb)
        return host, request, plan


class HostReclaimTask(MemoryChangeTask):
    """Free ``size_mb`` MiB on host node ``node`` from the host's guests
    (each bounded by ``max_loss_mb``), or give it back when negative.

    :raises HostNotFound, InvalidMemoryChange.
    """

    def __init__(self, ctxt, worker, change_uuid, host, node, size_mb,
                 exact, dry_run, conf):
        super().__init__(ctxt, worker, change_uuid, dry_run, conf)
        self.host = host
        self.node = node
        self.size_mb = size_mb
        self.exact = exact

    def _plan(self):
        worker, host = self.worker, self.host
        _check_node(worker, host, self.node)
        devices = []
        for record in instances.get_all(worker.db, host=host):
            topology = record.instance.get('numa_topology')
            # A migrating guest is left alone: its claim elsewhere counts
            # its devices as they were.
            if record.instance.get('migration_context') is None and \
                    topology is not None and topology.has_virtio_mem:
                devices.extend(reclaim.devices_of(record.instance.uuid,
                                                  topology))
        if not devices:
            raise exception.InvalidMemoryChange(
                reason=f"no guest on {host} has a virtio-mem device")
        request = {'host': host, 'node': self.node, 'size_mb': self.size_mb,
                   'exact': self.exact}
        plan = reclaim.plan_host(devices, self.node, -self.size_mb,
                                 self.exact, free_mb=_free_mb(worker, host),
                                 max_loss_mb=self.conf.max_loss_mb)
        return host, request, plan


def _host_of(instance):
    topology = instance.get('numa_topology')
    if not instance.get('host') or topology is None or \
            not topology.has_virtio_mem:
        raise exception.InvalidMemoryChange(
            reason=f"instance {instance.uuid} is not running with "
                   f"virtio-mem devices")
    if instance.get('migration_context') is not None:
        raise exception.InvalidMemoryChange(
            reason=f"instance {instance.uuid} is migrating (migration "
                   f"{instance.migration_context.migration_uuid}); change "
                   f"its memory once it has ended")
    return instance.host


def _check_node(worker, host, node):
    """Refuse a node the host does not have, before anything is planned:
    the plan would take everything "elsewhere", from nodes the operator
    did not name.

    :raises HostNotFound: the host never reported.
    :raises InvalidMemoryChange: naming the host's nodes.
    """
    nodes = sorted(cell.id for cell in worker.cache.get(host).topology.cells)
    if node not in nodes:
        raise exception.InvalidMemoryChange(
            reason=f"host {host} has no NUMA node {node}; its nodes are "
                   f"{', '.join(map(str, nodes))}")


def _free_mb(worker, host):
    """{host node: MiB not used}, from the host's last report with the
    scheduler's reservations applied."""
    topology = worker.cache.get(host).topology
    return {cell.id: cell.memory_mb - cell.memory_usage_mb
            for cell in topology.cells}


def _refuse_if_nothing_changes(host, request, plan):
    """Refuse a change of which no guest can make any part.

    Carried out, it would record a change, ask no guest and end short by
    all of it: the operator gets the same answer up front, with nothing
    recorded and the reason in one line (exit 127), as for a host with
    no device at all. A change that can make part of its amount goes
    ahead and answers how short it fell.
    """
    if plan.steps or not plan.short_mb:
        return
    who = f"instance {request['instance']}" if 'instance' in request \
        else f"the guests on {host}"
    verb = 'give' if plan.wanted_mb < 0 else 'take'
    where = f"on host node {plan.node}" + (
        '' if plan.exact else ' or elsewhere')
    raise exception.InvalidMemoryChange(
        reason=f"{who} can {verb} none of the {abs(plan.wanted_mb)} MiB "
               f"asked {where}: nothing changed")


def _status(result):
    """'failed' when every guest refused (nothing changed; the result
    says why in 'error'), 'partial' when some did, else 'done'."""
    refused = [g for g in result['guests'] if g.get('error')]
    if not refused:
        return memory_changes.DONE
    if len(refused) < len(result['guests']):
        return memory_changes.PARTIAL
    result['error'] = (f"every guest refused, nothing changed: "
                       f"{refused[0]['error']}")
    return memory_changes.FAILED


def carry_out(worker, ctxt, host, plan, conf):
    """Each guest of the plan in turn; returns the per-guest outcome."""
    by_guest = {}
    for step in plan.steps:
        by_guest.setdefault(step.instance_uuid, {})[step.cell] = \
            step.after_mb
    guests = []
    for instance_uuid, sizes in by_guest.items():
        try:
            guests.append(_resize_guest(worker, ctxt, host, instance_uuid,
                                        sizes, conf))
        except (exception.HypervisorError,
                exception.InstanceNotFound) as exc:
            # The hypervisor refused this guest (the libvirt test driver
            # cannot resize), or its host has no domain of it (an agent
            # of the test driver restarted): reported, its record
            # restored; the others still go.
            error = exception.brief(exc)
            if isinstance(exc, exception.InstanceNotFound):
                error = (f"host {host} has no domain of this guest (it is "
                         f"recorded there)")
            LOG.warning("Memory change of %s on %s refused: %s",
                        instance_uuid, host, error)
            guests.append({'instance': instance_uuid, 'requested': sizes,
                           'current': None, 'reached': False,
                           'released_mb': 0, 'error': error})
    _refresh(worker, ctxt, host)
    released = sum(g['released_mb'] for g in guests)
    return {'guests': guests, 'released_mb': released,
            'all_reached': all(g['reached'] for g in guests)}


def _resize_guest(worker, ctxt, host, instance_uuid, sizes, conf):
    before = instances.get(worker.db, instance_uuid).instance
    held_before = _held(before)
    _record_sizes(worker, before, requested=sizes)
    try:
        answer = worker.compute_api.resize_virtio_mem(
            ctxt, host, instance_uuid, sizes, conf.resize_timeout,
            timeout=conf.resize_timeout + CALL_MARGIN_S)
    except messaging.UnsupportedVersion as exc:
        _restore(worker, before)
        raise exception.InvalidMemoryChange(
            reason=f"the agent of {host} (or [upgrade_levels] compute) is "
                   f"older than compute API 1.5 and cannot resize virtio-mem "
                   f"devices") from exc
    except (exception.HypervisorError, exception.NotFound,
            exception.Invalid):
        # Refused before the guest was asked: the record goes back to
        # what it said. (A timeout is not caught: the guest may have been
        # asked, so the larger requested size stays held until a usage
        # audit or the next change reads the device.)
        _restore(worker, before)
        raise
    current = {int(cell): mib for cell, mib in answer['current'].items()}
    after = _record_sizes(worker, instances.get(worker.db,
                                                instance_uuid).instance,
                          current=current)
    outcome = {'instance': instance_uuid, 'requested': sizes,
               'current': current, 'reached': answer['reached'],
               'released_mb': held_before - _held(after)}
    if not answer['reached']:
        LOG.warning("Memory change of %s on %s: the guest did not reach "
                    "%s MiB within %s s (now %s MiB)", instance_uuid, host,
                    sizes, conf.resize_timeout, current)
    return outcome


def _restore(worker, instance):
    instances.update(worker.db, instance.uuid,
                     {'numa_topology': instance.numa_topology})


def _held(instance):
    return sum(cell.memory_held_mb for cell in instance.numa_topology.cells)


def _record_sizes(worker, instance, requested=None, current=None):
    """Write requested and/or current sizes into the instance record.

    A device whose current size was never reported gets its requested
    size as current before a change: the host has held that much.
    """
    topology = instance.numa_topology.obj_clone()
    for cell in topology.cells:
        if not cell.has_virtio_mem:
            continue
        if requested and cell.id in requested:
            if cell.virtio_mem_current_mb is None:
                cell.virtio_mem_current_mb = cell.virtio_mem_requested_mb
            cell.virtio_mem_requested_mb = requested[cell.id]
        if current and current.get(cell.id) is not None:
            cell.virtio_mem_current_mb = current[cell.id]
    return instances.update(worker.db, instance.uuid,
                            {'numa_topology': topology}).instance


def _refresh(worker, ctxt, host):
    try:
        worker.compute_api.refresh_usage(
            ctxt, host, timeout=worker.settings.check_timeout)
    except Exception as exc:  # noqa: BLE001 - the periodic recompute heals
        LOG.warning("%s did not recompute its usage after a memory change "
                    "(%s); it does at its next periodic recompute", host,
                    exc)
