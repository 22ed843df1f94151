"""Guests this host creates or adopts.

Building claims the guest's resources under the tracker's lock, records
the placement with the conductor, then asks the driver to create the
guest with the NUMA XML of that placement; a failure at any step releases
what was taken. Describing reads back the guests the hypervisor already
runs, so the conductor can adopt the ones numamig did not create.
"""

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import cpuspec
from numamig import exception
from numamig import objects
from numamig.compute import claims
from numamig.compute import report
from numamig.objects import fields

LOG = logging.getLogger(__name__)

STATUS_RUNNING = fields.PowerState.RUNNING


def _record_running(agent, ctxt, recorded):
    """The guest runs: say so in the records (operators read ``power``
    there). Best effort: the guest is built whatever this answers."""
    try:
        return agent.conductor_api.instance_update(
            ctxt, recorded.uuid, {'power_state': STATUS_RUNNING})
    except Exception as exc:  # noqa: BLE001 - advisory, logged
        LOG.warning("%s: instance %s runs but its power state was not "
                    "recorded: %s", agent.host, recorded.uuid, exc)
        return recorded


def _already_built(agent, ctxt, instance):
    recorded = agent.conductor_api.instance_get(ctxt, instance.uuid)
    if recorded.get('host') != agent.host:
        raise exception.BuildRefused(
            reason=f"a guest with uuid {instance.uuid} already runs on "
                   f"{agent.host}, but the records place it on "
                   f"{recorded.get('host')}; nothing was changed")
    if instance.uuid not in agent.tracker.instance_uuids():
        agent.tracker.track_instance(recorded)
    LOG.info("%s: instance %s already runs here (a repeated build "
             "request); nothing done", agent.host, instance.uuid)
    return recorded


def _forget_placement(agent, ctxt, instance):
    """After a failed spawn: the records place the guest nowhere. Best
    effort: the conductor removes the record of a guest no host built
    anyway, and the spawn's error is what its caller must see."""
    try:
        agent.conductor_api.instance_set_placement(ctxt, instance.uuid, None,
                                                   None)
    except (exception.NumamigException,
            messaging.MessagingException) as exc:
        LOG.warning("%s: the placement of instance %s, which was not "
                    "created, was not cleared: %s", agent.host,
                    instance.uuid, exception.brief(exc))


def check_name_free(agent, instance, guests,
                    refusal=exception.MigrationPreCheckError):
    """Refuse a guest whose name another guest here has: the name is
    the libvirt domain's, which libvirt keeps unique per host.

    :param guests: {uuid: domain name} of this host's guests, as the
        caller read them (driver.list_guests).
    :param refusal: the exception to raise (BuildRefused for a build).
    :raises MigrationPreCheckError: naming the guest that has it.
    """
    for uuid, name in guests.items():
        if name == instance.name and uuid != instance.uuid:
            raise refusal(
                reason=f"a guest named {name!r} runs on {agent.host} "
                       f"already (instance {uuid}): the name is the "
                       f"libvirt domain's, unique per host")


def build_instance(agent, ctxt, instance, limits):
    """Claim, record and create a guest on this host.

    :returns: the recorded Instance (host and numa_topology set).
    Idempotent: a request delivered again (at-least-once RPC after a
    lost connection) for a guest that already runs here returns its
    record and changes nothing; its failure path must never run then,
    or it would clear the record and free the pCPUs of a running guest.

    :raises BuildRefused: it does not fit here, or a guest of
        that uuid runs here that the records place elsewhere; nothing
        taken.
    :raises HypervisorError: the driver failed; the claim is released and
        the instance recorded with no host.
    """
    guests = agent.driver.list_guests()
    if instance.uuid in guests:
        return _already_built(agent, ctxt, instance)
    check_name_free(agent, instance, guests, exception.BuildRefused)
    placed = claims.instance_claim(agent.tracker, instance, limits)
    try:
        recorded = agent.conductor_api.instance_set_placement(
            ctxt, instance.uuid, agent.host, placed.get('numa_topology'))
    except Exception:
        agent.tracker.drop_instance(instance.uuid)
        raise
    try:
        agent.driver.spawn(recorded, recorded.get('numa_topology'))
    except Exception as exc:
        LOG.error("%s: creating instance %s failed: %s", agent.host,
                  instance.uuid, exception.brief(exc))
        agent.tracker.drop_instance(instance.uuid)
        _forget_placement(agent, ctxt, instance)
        raise
    agent.tracker.track_instance(recorded)
    recorded = _record_running(agent, ctxt, recorded)
    LOG.info("%s: built instance %s", agent.host, instance.uuid)
    report.send_now(agent, ctxt, f"building {instance.uuid}")
    return recorded


def adopt_guests(agent, ctxt):
    """Describe the NUMA guests the hypervisor runs that numamig lacks.

    Each is counted in this host's usage at once (it runs here whatever
    the records say), and returned as an Instance for the conductor to
    record. Guests without NUMA characteristics are left out (and
    logged): their usage is not NUMA-specific, so there is nothing to
    track for them; so are guests arriving by a migration (this host
    holds their claim).

    Which guests numamig lacks is asked of the records, not of this
    host's usage: a repeated request (the first answer was lost before
    the conductor recorded anything) describes the same guests again,
    although the first one counted them here already.
    """
    recorded = {i.uuid for i in agent.conductor_api.instance_get_all_by_host(
        ctxt, agent.host)}
    known = recorded | {c.instance_uuid for c in agent.tracker.claims()}
    result = []
    for uuid, name in sorted(agent.driver.list_guests().items()):
        if uuid in known:
            continue
        try:
            topology = agent.driver.get_guest_topology(uuid)
            specs = specs_of(topology) if topology and topology.cells \
                else None
        except exception.NumamigException as exc:
            LOG.warning("%s: guest %s (%s) cannot be described: %s",
                        agent.host, name, uuid, exc)
            continue
        if topology is None or not topology.cells:
            LOG.info("%s: guest %s (%s) has no NUMA characteristics; not "
                     "described", agent.host, name, uuid)
            continue
        topology.instance_uuid = uuid
        result.append(objects.Instance(
            uuid=uuid, name=name, host=agent.host,
            vcpus=len(topology.vcpus),
            memory_mb=sum(cell.memory_mb for cell in topology.cells),
            extra_specs=specs, numa_topology=topology))
    for instance in result:
        agent.tracker.track_instance(instance)
    return result


def specs_of(topology):
    """Flavor extra specs that request what a parsed placement shows.

    An adopted guest has no flavor; a later move claim rebuilds its
    request from these, so they must ask for the same cells, sizes, pins
    and page size the guest has now.
    """
    specs = {'hw:numa_nodes': str(len(topology.cells))}
    for cell in topology.cells:
        specs[f'hw:numa_cpus.{cell.id}'] = cpuspec.format_cpu_spec(
            cell.vcpus, allow_ranges=False)
        specs[f'hw:numa_mem.{cell.id}'] = str(cell.memory_mb)
    pinned = set().union(*(c.pcpuset for c in topology.cells))
    if pinned == topology.vcpus:
        specs['hw:cpu_policy'] = 'dedicated'
    elif pinned:
        specs['hw:cpu_policy'] = 'mixed'
        specs['hw:cpu_dedicated_mask'] = cpuspec.format_cpu_spec(
            pinned, allow_ranges=False)
    sizes = {c.pagesize for c in topology.cells if c.get('pagesize')}
    if sizes:
        specs['hw:mem_page_size'] = str(max(sizes))
    if topology.cpuset_reserved:
        specs['hw:emulator_threads_policy'] = 'isolate'
    specs.update(_virtio_mem_specs(topology))
    return specs


def _virtio_mem_specs(topology):
    """The hw:virtio_mem_* keys of a guest whose cells all have one
    device of one size and block (the only shape the flavor keys ask
    for); the requested size now travels in the topology itself.

    :raises InvalidNUMARequest: devices the flavor keys cannot describe
        (on some cells only, or of different sizes); such a guest is
        not adopted.
    """
    shapes = {(c.get('virtio_mem_size_mb'), c.get('virtio_mem_block_kb'))
              for c in topology.cells}
    if shapes == {(None, None)}:
        return {}
    if len(shapes) != 1 or not all(c.has_virtio_mem
                                   for c in topology.cells):
        raise exception.InvalidNUMASpec(
            key='hw:virtio_mem_size', value=sorted(shapes, key=str),
            reason="numamig gives every guest cell one virtio-mem device "
                   "of one size and block; this guest's differ")
    (size, block), = shapes
    return {'hw:virtio_mem_size': str(size),
            'hw:virtio_mem_block': str(block)}
