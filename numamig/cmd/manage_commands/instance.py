"""numamig-manage instance: create, adopt, list, show and delete guests.

Listing and showing read the conductor's database; ``show`` also asks
the guest's host for its domain XML (through the conductor) and says
where it differs from the records. Creating, adopting and deleting go
through the conductor, which claims (or releases) on the host before the
records change.
"""

from oslo_utils import uuidutils

from numamig import exception
from numamig.cmd import common
from numamig.cmd import pictures
from numamig.cmd.manage_commands import _access
from numamig.cmd.manage_commands import _locality
from numamig.cmd.manage_commands import _memory

# Loaded by the actions that ask the conductor (_access.conductor).
messaging = common.lazy('oslo_messaging')

# Seconds ``show`` waits for the domain XML before showing records only.
XML_TIMEOUT = 10
# The power state numamig records for a guest whose domain its host's
# agent did not find at its start (numamig.compute.reconcile).
SHUTDOWN = 'shutdown'


class InstanceCommands:
    """Guests: create, adopt existing ones, list and show placements."""

    @common.args('--host', dest='host', metavar='HOST', default=None,
                 help="Create the guest on this compute host.")
    @common.args('--auto', action='store_true', default=False,
                 help="Let the scheduler choose the host.")
    @common.args('--vcpus', type=int, required=True, metavar='N',
                 help="Number of vCPUs.")
    @common.args('--memory', type=int, required=True, metavar='MiB',
                 help="Memory in MiB.")
    @common.args('--property', dest='properties', action='append',
                 default=[], metavar='KEY=VALUE',
                 help="A flavor extra spec: an hw: key such as "
                      "hw:cpu_policy=dedicated or hw:mem_page_size=1GB, "
                      "pci_passthrough:alias=NAME:COUNT[,NAME:COUNT] "
                      "(the conductor's [pci] alias) or "
                      "numamig:device_migration=unplug|refuse; repeat "
                      "for several.")
    @common.args('--name', default=None, metavar='NAME',
                 help="Guest name (default: guest-<first 8 uuid digits>). "
                      "It is the libvirt domain's name: a host where "
                      "another guest has it refuses the guest.")
    @common.args('--project', default='numamig', metavar='PROJECT',
                 help="Owning project id (default: numamig).")
    @common.format_option
    @common.guarded
    def create(self, host=None, auto=False, vcpus=None, memory=None,
               properties=(), name=None, project='numamig',
               output_format='human'):
        """Create a guest on a host (--host) or a scheduled one (--auto).

        The conductor checks the NUMA request (the hw: properties), asks
        the host to claim it and create the guest, and records where it
        landed. Exit codes: 0 created; 1 no host could take it (each
        host's reason is printed); 127 bad input (a --host that never
        reported, an unknown or bad hw: key; nothing recorded); 255 the
        conductor cannot be reached.
        """
        if bool(host) == bool(auto):
            raise exception.Invalid(reason="give exactly one of --host HOST "
                                           "and --auto")
        instance = _new_instance(vcpus, memory, properties, name, project)
        api = _access.conductor()
        try:
            created = api.instance_create(_access.context(), instance, host)
        except exception.InstanceBuildError as exc:
            return common.fail(exc, common.EXIT_NO, output_format)
        common.print_output(_view(created), output_format, _print_show)
        return common.EXIT_OK

    @common.args('host', metavar='HOST',
                 help="Compute host whose unknown guests to adopt.")
    @common.format_option
    @common.guarded
    def adopt(self, host, output_format='human'):
        """Record the NUMA guests a host runs that numamig does not know.

        The host parses each unknown guest's domain XML into a placement
        and counts it in its usage; the conductor records it. Guests
        without NUMA characteristics are left alone. Exit codes: 0 done
        (also when there was nothing to adopt); 1 the host is down;
        127 unknown host; 255 the conductor cannot be reached.
        """
        adopted = _access.conductor().instance_adopt(_access.context(),
                                                     host)
        data = {'host': host, 'adopted': [_view(i) for i in adopted]}
        common.print_output(data, output_format, _print_adopted)
        return common.EXIT_OK

    @common.args('--host', dest='host', metavar='HOST', default=None,
                 help="Only guests recorded on this host.")
    @common.format_option
    @common.guarded
    def list(self, host=None, output_format='human'):
        """List guests with their host, power state, size and placement.

        The power state is the one recorded: ``shutdown`` means that the
        host's agent found no domain for the guest at its start (a
        libvirt test-driver host loses its guests whenever its agent
        restarts). Exit codes: 0 listed (also when there is none); 127
        --host names a host the conductor never heard of; 255 the
        database cannot be used.
        """
        from numamig.db import compute_nodes
        from numamig.db import instances
        from numamig.db import live_migratable
        with _access.database() as db:
            records = instances.get_all(db, host=host)
            if host and not records:
                # "No instance" would hide a misspelt host name.
                compute_nodes.get(db, host)
            answers = live_migratable.get_many(
                db, [r.instance.uuid for r in records])
        data = {'instances': [_view(r.instance,
                                    answers.get(r.instance.uuid))
                              for r in records]}
        common.print_output(data, output_format, _print_list)
        return common.EXIT_OK

    @common.args('uuid', metavar='INSTANCE',
                 help="Instance UUID, or its name when one instance has it.")
    @common.args('--no-xml', dest='no_xml', action='store_true',
                 default=False,
                 help="Show the records only; do not ask the host for the "
                      "domain XML.")
    @common.format_option
    @common.guarded
    def show(self, uuid, no_xml=False, output_format='human'):
        """Show a guest's placement and compare it with its domain XML.

        Placement: guest cell -> host cell, vCPU -> pCPU pins, page size,
        emulator threads, and any move claim it holds. Unless --no-xml,
        the domain XML is fetched from the host and every difference with
        the records is listed. Exit codes: 0 shown and the XML agrees (or
        was not compared); 3 the XML differs from the records; 127
        unknown instance; 255 the database cannot be used.
        """
        from numamig.db import instances
        from numamig.db import live_migratable
        uuid = _access.instance_uuid(uuid)
        with _access.database() as db:
            instance = instances.get(db, uuid).instance
            where = _host_locality(db, instance.get('host'))
            answer = live_migratable.get_many(db, [uuid]).get(uuid)
        data = _view(instance, answer)
        data['locality'] = _locality.guest_of(where, instance.uuid)
        data['locality_policy'] = where.policy if where else None
        if not no_xml:
            data['xml_check'] = _xml_check(instance)
        common.print_output(data, output_format, _print_show)
        differs = data.get('xml_check', {}).get('differences')
        return common.EXIT_PROBLEMS if differs else common.EXIT_OK


    @common.args('operation', choices=['set'],
                 help="'set': set the guest's plugged virtio-mem memory.")
    @common.args('uuid', metavar='INSTANCE',
                 help="Instance UUID, or its name when one instance has it.")
    @common.args('--host-node', dest='host_node', type=int, required=True,
                 metavar='P', help="Host NUMA node to take from or give to "
                                   "first.")
    @common.args('--size', type=int, required=True, metavar='MiB',
                 help="The guest's new plugged virtio-mem memory, all its "
                      "nodes together.")
    @common.args('--exact', action='store_true', default=False,
                 help="Change only guest nodes backed by node P (possibly "
                      "short of --size).")
    @common.args('--dry-run', dest='dry_run', action='store_true',
                 default=False, help="Show the plan; change nothing.")
    @common.format_option
    @common.guarded
    def memory(self, operation, uuid, host_node=None, size=None, exact=False,
               dry_run=False, output_format='human'):
        """Set a guest's memory through its virtio-mem devices, node P first.

        The seed's mem-set -n P [-e]: the change (--size minus what the
        devices have now) is made on the guest nodes backed by host node
        P first, then (without --exact) on the others. A growth is
        refused when node P has not the memory free. Host memory is
        released only by what the guest really unplugged; a guest that
        does not answer within [virtio_mem] resize_timeout is reported
        and keeps what it had. Exit codes: 0 done (or planned) in full;
        1 short of --size or the guest did not answer in time; 127 bad
        input or unknown instance (nothing changed); 255 the conductor
        cannot be reached.
        """
        uuid = _access.instance_uuid(uuid)
        _memory.check(host_node, size)
        return _memory.run('instance_memory_set', output_format,
                           instance_uuid=uuid, node=host_node, size_mb=size,
                           exact=exact, dry_run=dry_run)

    @common.args('uuid', metavar='INSTANCE',
                 help="Instance UUID, or its name when one instance has it.")
    @common.format_option
    @common.guarded
    def delete(self, uuid, output_format='human'):
        """Delete a guest: destroy its domain, release its usage, drop it.

        The conductor asks the guest's host to destroy the domain and
        release the guest's pCPUs and pages, then removes the record.
        Refused while a migration of the guest is in progress (abort it
        first); a guest whose host does not answer stays recorded.
        Deleting an instance that is not recorded changes nothing and is
        not an error, so a retry is safe. The answer says whether a
        domain was destroyed, or that the host had none for the guest
        (its record and usage are removed all the same). Exit codes: 0
        deleted (or not recorded); 127 malformed UUID, or a migration is
        in progress; 255 the conductor or the host cannot be reached.
        """
        uuid = _access.instance_uuid(uuid)
        ctxt = _access.context()
        domain = _domain_before_delete(
            _access.conductor(timeout=XML_TIMEOUT), ctxt, uuid)
        deleted = _access.conductor().instance_delete(ctxt, uuid)
        data = {'uuid': uuid, 'deleted': deleted,
                'domain': domain if deleted else None}
        common.print_output(data, output_format, _print_deleted)
        return common.EXIT_OK


def _domain_before_delete(api, ctxt, uuid):
    """Whether the guest's host has its domain, asked just before the
    delete (the delete answers only whether a record was removed):
    'present', 'missing' (recorded on a host whose hypervisor has no
    domain for it, e.g. a test-driver host whose agent restarted), or
    'unknown' (not recorded, no host, or the host did not say)."""
    try:
        api.get_domain_xml(ctxt, uuid)
    except exception.DomainNotFound:
        return 'missing'
    except (exception.NumamigException, messaging.MessagingException):
        # Not recorded, no host, the host down or silent: the delete
        # itself says what is wrong.
        return 'unknown'
    return 'present'


def _print_deleted(data):
    if not data['deleted']:
        print(f"Instance {data['uuid']} is not recorded: nothing to "
              f"delete.")
        return
    domain = {
        'present': "domain destroyed",
        'missing': "its host had no domain for it (nothing was "
                   "destroyed)",
    }.get(data['domain'], "domain destroyed if its host had one")
    print(f"Deleted instance {data['uuid']}: {domain}, usage released, "
          f"record removed.")


def _new_instance(vcpus, memory, properties, name, project):
    from numamig import objects
    specs = parse_properties(properties)
    if vcpus is None or vcpus <= 0:
        raise exception.Invalid(reason=f"--vcpus must be positive, got "
                                       f"{vcpus}")
    if memory is None or memory <= 0:
        raise exception.Invalid(reason=f"--memory must be a positive MiB "
                                       f"count, got {memory}")
    uuid = uuidutils.generate_uuid()
    instance = objects.Instance(
        uuid=uuid, name=name or f"guest-{uuid[:8]}", project_id=project,
        vcpus=vcpus, memory_mb=memory, extra_specs=specs)
    _check_request(instance)
    return instance


# The flavor keys outside the hw: namespace that numamig reads: a guest's
# passed-through devices and how they cross a live migration
# (doc/source/devices.rst, device-migration.rst).
_OTHER_KEYS = ('pci_passthrough:alias', 'numamig:device_migration')


def parse_properties(properties):
    """``['hw:a=b', ...]`` -> ``{'hw:a': 'b'}``, refusing malformed ones.

    :raises Invalid: naming the property and what is wrong.
    """
    specs = {}
    for prop in properties:
        key, sep, value = prop.partition('=')
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise exception.Invalid(reason=f"--property {prop!r} is not "
                                           f"KEY=VALUE")
        if not key.startswith('hw:') and key not in _OTHER_KEYS:
            raise exception.Invalid(
                reason=f"--property {key}: numamig reads hw: extra specs "
                       f"and {', '.join(_OTHER_KEYS)}, no other key")
        if key in specs:
            raise exception.Invalid(reason=f"--property {key} is given "
                                           f"twice")
        specs[key] = value
    return specs


def _check_request(instance):
    """Parse the NUMA request locally so that bad specs never travel."""
    from numamig.conf import CONF
    from numamig.numa import constraints
    from numamig.numa import pci
    specs = dict(instance.extra_specs)
    aliases = pci.parse_aliases(CONF.pci.alias)
    if not aliases:
        # The conductor's [pci] alias resolves the aliases; this host's
        # configuration may not carry them.
        specs.pop(pci.ALIAS_SPEC_KEY, None)
    constraints.get_numa_request(instance.vcpus, instance.memory_mb, specs,
                                 {}, aliases)
    mode = specs.get(pci.DEVICE_MIGRATION_FLAVOR_KEY)
    if mode is not None and mode not in pci.DEVICE_MIGRATION_MODES:
        raise exception.Invalid(
            reason=f"--property {pci.DEVICE_MIGRATION_FLAVOR_KEY}={mode}: "
                   f"must be one of {', '.join(pci.DEVICE_MIGRATION_MODES)}")


def _xml_check(instance):
    from numamig.audit import placement
    from numamig.virt.libvirt import guest_parse
    if not instance.host:
        return {'compared': False, 'reason': 'the guest has no host'}
    try:
        xml = _access.conductor(timeout=XML_TIMEOUT).get_domain_xml(
            _access.context(), instance.uuid)
        actual = guest_parse.parse_guest_topology(xml)
    except Exception as exc:  # noqa: BLE001 - shown, records still shown
        if isinstance(exc, exception.InstanceNotFound):
            # The record is there (it was just read): the host is what
            # does not know the guest.
            return {'compared': False,
                    'reason': f"host {instance.host} has no domain of "
                              f"this guest (it is recorded there)"}
        return {'compared': False, 'reason': common.describe(exc)}
    return {'compared': True, 'differences': placement.differences(
        instance.get('numa_topology'), actual)}


def _view(instance, answer=None):
    topology = instance.get('numa_topology')
    context = instance.get('migration_context')
    view = {
        'uuid': instance.uuid, 'name': instance.name,
        'project_id': instance.project_id, 'host': instance.get('host'),
        'vcpus': instance.vcpus, 'memory_mb': instance.memory_mb,
        'power_state': instance.power_state,
        'task_state': instance.get('task_state'),
        'extra_specs': dict(instance.extra_specs),
        'numa_topology': common.plain(topology),
        'placement': pictures.placement_lines(topology),
        'summary': _summary(topology),
        'claim': None,
        'live_migratable': _answer(answer),
    }
    if context is not None:
        view['claim'] = {
            'migration_uuid': context.migration_uuid,
            'source_host': context.source_host,
            'dest_host': context.dest_host,
            'placement': pictures.placement_lines(
                context.get('new_numa_topology'))}
    return view


def _answer(answer):
    """The standing live-migratable answer as shown: None when no
    conductor has looked at the guest yet (just created, or
    ``[conductor] live_migratable_interval`` is 0)."""
    if answer is None:
        return None
    return {'status': answer['status'], 'reasons': answer['reasons'],
            'witness': answer['witness'],
            'changed_at': answer['changed_at'].isoformat(
                timespec='seconds'),
            'checked_at': answer['checked_at'].isoformat(
                timespec='seconds')}


def _migratable_text(view):
    answer = view.get('live_migratable')
    return '-' if answer is None else answer['status']


def _summary(topology):
    if topology is None or not topology.cells:
        return 'no NUMA placement'
    cells = ','.join(f"{c.id}->{c.host_cell}" for c in topology.cells)
    pins = len(topology.cpu_pinning)
    sizes = {pictures.pages_text(c.pagesize) for c in topology.cells}
    return f"cells {cells}; {pins} pinned vCPUs; {', '.join(sorted(sizes))}"


def _print_list(data):
    if not data['instances']:
        print("No instance is recorded.")
        return
    print(f"{'UUID':<36}  {'NAME':<16} {'HOST':<12} {'POWER':<8} "
          f"{'VCPU':>4} {'MiB':>6} {'MOVABLE':<8}  PLACEMENT")
    for row in data['instances']:
        claim = ' (claim held)' if row['claim'] else ''
        print(f"{row['uuid']:<36}  {row['name']:<16} "
              f"{row['host'] or '-':<12} {row['power_state']:<8} "
              f"{row['vcpus']:>4} {row['memory_mb']:>6} "
              f"{_migratable_text(row):<8}  "
              f"{row['summary']}{claim}")
    if any(row['power_state'] == SHUTDOWN for row in data['instances']):
        # numamig records 'shutdown' only when an agent, at its start,
        # found no domain for a guest recorded on its host.
        print(f"{SHUTDOWN}: its host found no domain for it when its agent "
              f"started (a libvirt test-driver host loses its guests "
              f"whenever its agent restarts); 'instance delete' removes "
              f"the record")


def _print_show(data):
    print(f"Instance {data['name']} ({data['uuid']})")
    print(f"  host {data['host'] or '-'}, {data['vcpus']} vCPUs, "
          f"{data['memory_mb']} MiB, power {data['power_state']}")
    if data['extra_specs']:
        print("  specs " + ' '.join(
            f"{k}={v}" for k, v in sorted(data['extra_specs'].items())))
    for line in data['placement']:
        print(f"  {line}")
    answer = data.get('live_migratable')
    if answer is None:
        print("  live-migratable: not known yet (no conductor has looked "
              "at it)")
    else:
        where = f" (e.g. to {answer['witness']})" \
            if answer['status'] == 'yes' and answer['witness'] else ''
        print(f"  live-migratable: {answer['status']}{where}, since "
              f"{answer['changed_at']}")
        for reason in answer['reasons']:
            print(f"    {reason['kind']}: {reason['detail']}")
    if data['claim']:
        claim = data['claim']
        print(f"  claim held on {claim['dest_host']} by migration "
              f"{claim['migration_uuid']}:")
        for line in claim['placement']:
            print(f"    {line}")
    _print_locality(data)
    check = data.get('xml_check')
    if check is None:
        return
    if not check['compared']:
        print(f"  domain XML not compared: {check['reason']}")
    elif check['differences']:
        print("  domain XML DIFFERS from the records:")
        for diff in check['differences']:
            print(f"    {diff}")
    else:
        print("  domain XML on the host agrees with the records")


def _host_locality(db, host):
    """The HostLocality of the host's last report; None when the host
    never reported or its agent is older than the locality watch."""
    from numamig.db import compute_nodes
    if not host:
        return None
    try:
        return compute_nodes.get(db, host).get('locality')
    except exception.HostNotFound:
        return None


def _print_locality(data):
    entry = data.get('locality')
    if entry is not None:
        print(f"  locality: {_locality.guest_text(entry)}")
    elif data.get('locality_policy') in ('report', 'act'):
        print("  locality: not seen at the watch's last look")


def _print_adopted(data):
    if not data['adopted']:
        print(f"{data['host']}: no unknown NUMA guest to adopt.")
        return
    print(f"{data['host']}: adopted {len(data['adopted'])} guest(s):")
    for view in data['adopted']:
        print(f"  {view['name']} ({view['uuid']}): {view['summary']}")
