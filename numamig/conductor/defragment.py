"""Defragmentation plans: the fewest migrations that make room
for a guest of given specs on one host; nothing moves.

The conductor gives the scheduler (numamig.scheduler.defragment) every
guest numamig may move, with its placement and its request rebuilt from
its specs; the scheduler searches (with chains through third hosts). A
guest whose migration is in progress, whose specs make no request, or
whose migration policy is unknown stays where it is. A guest that fits
on none of the candidate hosts even were they empty is refused as bad
input before any search.
Carrying a plan out is the task's (tasks/defragment.py).
"""

import time
import typing

from numamig import exception
from numamig.conductor import drain
from numamig.conductor import records
from numamig.db import instances
from numamig.db import migrations
from numamig.numa import constraints
from numamig.numa import fit as numa_fit
from numamig.numa import instance_request
from numamig.numa import specs
from numamig.numa import usage
from numamig.objects import fields

STATUS = fields.MigrationStatus

# Most guests one plan may move, and most hosts --hosts may name.
MAX_MOVES = 8
MAX_HOSTS = drain.MAX_DESTINATIONS


class Resident(typing.NamedTuple):
    """A guest as the scheduler's defragmentation plan takes it."""

    uuid: str
    name: str
    placed: object
    request: object = None
    pagesize_kb: int = None


def request_of(vcpus, memory_mb, extra_specs, pci_aliases=None):
    """The unplaced InstanceNUMATopology of a guest of these specs
    (``pci_aliases``: [pci] alias, for its pci_passthrough:alias).

    :raises InvalidNUMARequest: the specs make no valid request.
    :raises Invalid: they make no NUMA request at all.
    """
    request = constraints.get_numa_request(vcpus, memory_mb, extra_specs,
                                           {}, pci_aliases)
    if request is None:
        raise exception.Invalid(
            reason="the specs ask for no NUMA characteristic (no pinned "
                   "vCPU, guest node or page size): there is nothing to "
                   "defragment for")
    return request


def check_fits_empty(worker, request, hosts=None):
    """Refuse a guest no candidate host could hold were it empty: no
    number of migrations makes room for it.

    :raises Invalid: naming the hosts looked at.
    """
    names = sorted(hosts) if hosts is not None else \
        [state.host for state in worker.cache.host_states()]
    for name in names:
        topology = usage.cleared(worker.cache.get(name).report.topology)
        if numa_fit.fit(topology, request, limits=worker.settings.limits,
                        strategy=worker.scheduler.cell_strategy).fits:
            return
    raise exception.Invalid(
        reason=f"the guest fits on none of the {len(names)} host(s) "
               f"{'named' if hosts is not None else 'known'} even were "
               f"they empty: no migration can make room for it")


def plan(worker, vcpus, memory_mb, extra_specs, hosts=None, max_moves=3):
    """Where a guest of ``extra_specs`` could go after the fewest moves.

    :raises InvalidNUMARequest: the specs make no valid request, or name
        a key of numamig's namespaces it does not read (UnknownNUMASpec).
    :raises UnknownMigrationPolicy: they name an unknown policy.
    :raises Invalid: they make no NUMA request at all (any host with
        room takes such a guest; nothing to defragment for), or the
        guest fits on no candidate host even empty.
    :raises HostNotFound: a host of ``hosts`` never reported.
    """
    start = time.monotonic()
    # The rule of every place that takes flavor-like specs: a misspelt
    # key would otherwise be dropped and the room made for another guest.
    specs.check(extra_specs, {}, worker.settings.foreign_numa_specs,
                worker.settings.migration_policies)
    request = request_of(vcpus, memory_mb, extra_specs,
                         worker.settings.pci_aliases)
    records.sync_reports(worker)
    for host in hosts or ():
        worker.cache.get(host)
    check_fits_empty(worker, request, hosts)
    found = worker.scheduler.plan_defragment(
        request, _residents(worker), limits=worker.settings.limits,
        disabled=drain.disabled_hosts(worker),
        hosts=None if hosts is None else set(hosts),
        pagesize_kb=None, max_moves=max_moves)
    return {
        'found': found.found, 'host': found.host, 'chained': found.chained,
        'placement': None if found.placement is None
        else found.placement.topology(),
        'moves': [{'instance_uuid': m.guest.uuid, 'name': m.guest.name,
                   'source_host': m.source, 'dest_host': m.host,
                   'numa_topology': None if m.placement is None
                   else m.placement.topology()} for m in found.moves],
        'reason': found.reason,
        'search': {'steps': found.steps, 'stopped': found.stopped,
                   'outcome': found.outcome,
                   'elapsed_ms': round((time.monotonic() - start) * 1000,
                                       1)},
    }


def _residents(worker):
    """{host: Residents} of every guest that may move now."""
    moving = {m.instance_uuid for status in STATUS.IN_PROGRESS
              for m in migrations.get_all(worker.db, status=status)}
    found = {}
    for record in instances.get_all(worker.db):
        instance = record.instance
        if not instance.host or instance.uuid in moving or \
                instance.get('numa_topology') is None or \
                drain.policy_problem(worker, instance) is not None:
            # It stays: its migration would be refused whatever its
            # destination (an unknown convergence policy).
            continue
        try:
            request = instance_request.numa_request(instance)
        except exception.Invalid:
            continue
        found.setdefault(instance.host, []).append(Resident(
            instance.uuid, instance.name, instance.numa_topology, request,
            instance_request.source_page_size(instance)))
    return found
