"""numamig-manage host: compute hosts as their last reports describe them.

``list``, ``show`` and ``export-topology`` read the conductor's database
(the hosts' last reports, with usage, move claims and maintenance state)
and change nothing; ``delete``, ``disable``, ``enable`` and ``drain``
ask the conductor, which applies its rules (a host in use is not
deleted; a drain plans from the scheduler's cache, then moves).
"""

import datetime

from numamig import cpuspec
from numamig import exception
from numamig.cmd import common
from numamig.cmd import pictures
from numamig.cmd.manage_commands import _access
from numamig.cmd.manage_commands import _defragment_output
from numamig.cmd.manage_commands import _drain_output
from numamig.cmd.manage_commands import _drain_run_output
from numamig.cmd.manage_commands import _locality
from numamig.cmd.manage_commands import _memory
from numamig.conf import CONF


class HostCommands:
    """Compute hosts: state, versions, NUMA topology and usage."""

    @common.format_option
    @common.guarded
    def list(self, output_format='human'):
        """List compute hosts with state, version and free resources.

        Per host: up or down (last report within [DEFAULT]
        service_down_time), service version, age of the last report and,
        per cell, free/total dedicated pCPUs and free/total huge pages;
        a host disabled for maintenance is marked, with the reason.
        Exit codes: 0 listed (also when no host reported yet); 255 the
        database cannot be used.
        """
        with _access.direct_reader() as reader:
            hosts = counts = None
            if reader is not None:
                hosts = reader.host_reports()
                counts = reader.instance_counts()
        if hosts is None:
            hosts, counts = _list_through_orm()
        rows = [_host_row(report, counts.get(report.host, 0), maintenance)
                for report, maintenance in hosts]
        common.print_output({'hosts': rows}, output_format, _print_list)
        return common.EXIT_OK

    @common.args('host', metavar='HOST', help="Compute host name.")
    @common.format_option
    @common.guarded
    def delete(self, host, output_format='human'):
        """Forget a host that no longer runs numamig (decommissioned).

        Its record goes, so it no longer counts in upgrade checks (an old
        release's host no longer holds NUMA live migration back) nor in
        listings. Refused, with nothing changed, while its agent still
        reports or guests, claims or migrations still involve it. Exit
        codes: 0 deleted; 127 unknown host, or the host is still in use;
        255 the conductor cannot be reached.
        """
        from numamig.db import compute_nodes
        with _access.database() as db:
            compute_nodes.get(db, host)  # HostNotFound: 127, a typo
        api = _access.conductor()
        api.compute_node_delete(_access.context(), host)
        common.print_output({'host': host, 'deleted': True}, output_format,
                            lambda d: print(f"Host {d['host']} deleted."))
        return common.EXIT_OK

    @common.args('host', metavar='HOST', help="Compute host name.")
    @common.format_option
    @common.guarded
    def show(self, host, output_format='human'):
        """Show a host's topology per cell, usage and guests.

        Per cell: dedicated, shared, pinned and free pCPUs drawn by SMT
        core, the dedicated pCPUs CPU power management has powered down,
        memory, page pools used/free and distances (those libvirt
        does not report marked as assumed: local 10, remote 20); the
        assignable PCI functions ([pci] device_spec) with their node and
        holder; then the guests recorded on the host and the move claims
        held on it. A
        host disabled for maintenance says since when and why.
        Exit codes: 0 shown; 127 unknown host; 255 the database cannot
        be used.
        """
        from numamig.db import compute_nodes
        from numamig.db import instances
        with _access.database() as db:
            report = compute_nodes.get(db, host)
            guests = [r.instance for r in instances.get_all(db, host=host)]
            claims = [r.instance for r in
                      instances.get_claims_on_host(db, host)]
            maintenance = compute_nodes.maintenance(db).get(host)
        from numamig.numa import vmem
        devices = vmem.by_host_node(g.get('numa_topology') for g in guests)
        data = dict(_host_row(report, len(guests), maintenance),
                    topology=common.plain(report.topology),
                    distances=_distances(report.topology),
                    cpu=_cpu_entry(report.get('cpu')),
                    cpu_power=_cpu_power_entry(report.get('cpu_power')),
                    guests=[_guest_entry(g) for g in guests],
                    claims=[_claim_entry(c) for c in claims],
                    virtio_mem={str(node): entry for node, entry in
                                sorted(devices.items())},
                    locality=_locality.host_entry(report.get('locality')),
                    pci_devices=_pci_entries(report.topology),
                    pci_per_node=_pci_per_node(report.topology))
        common.print_output(data, output_format,
                            lambda d: _print_show(d, report))
        return common.EXIT_OK

    @common.args('host', metavar='HOST', help="Compute host name.")
    @common.format_option
    @common.guarded
    def export_topology(self, host, output_format='human'):
        """Export a host's NUMA resources as a NodeResourceTopology.

        The Kubernetes topology-aware scheduling format (one zone per
        NUMA node: cpu, memory and hugepages capacity/allocatable/
        available), from the host's last report. Use --format json for
        the object itself; the default prints a table of it.
        Exit codes: 0 exported; 127 unknown host; 255 the database
        cannot be used.
        """
        from numamig.db import compute_nodes
        from numamig.db import instances
        from numamig.numa import vmem
        from numamig.scheduler import nrt
        with _access.database() as db:
            report = compute_nodes.get(db, host)
            devices = vmem.by_host_node(
                r.instance.get('numa_topology')
                for r in instances.get_all(db, host=host))
        data = nrt.export(report.host, report.topology, report.fingerprint,
                          virtio_mem=devices)
        common.print_output(data, output_format, _print_nrt)
        return common.EXIT_OK


    @common.args('hosts', nargs='+', metavar='HOST',
                 help="Compute host names (two or more to be useful).")
    @common.format_option
    @common.guarded
    def cpu_baseline(self, hosts, output_format='human'):
        """Compute a CPU model every named host can run.

        From the hosts' last reports (libvirt's host CPU and domain
        capabilities): a custom model usable on all of them (the
        host-model most of them share) and the features every one
        reports, with the guest <cpu> XML to use. Conservative: a
        feature one host's model implies but does not list is left out.
        Give guests this CPU to keep them movable between these hosts.
        Exit codes: 0 a model was found; 1 no model is usable on all the
        hosts (the common features are still shown); 127 an unknown host,
        or one that reported no CPU (an agent of release 1); 255 the
        database cannot be used.
        """
        from numamig import cpumodel
        from numamig.db import compute_nodes
        from numamig.virt.libvirt import cpu as libvirt_cpu
        names = sorted(set(hosts))
        with _access.database() as db:
            cpus = {name: compute_nodes.get(db, name).get('cpu')
                    for name in names}
        answer = cpumodel.baseline(cpus)
        data = {
            'hosts': [_cpu_row(name, cpus[name]) for name in names],
            'model': answer.model, 'features': list(answer.features),
            'common_models': list(answer.common_models),
            'note': answer.note,
            'cpu_xml': libvirt_cpu.guest_cpu_xml(cpumodel.GuestCPU(
                cpumodel.MODE_CUSTOM, answer.model,
                frozenset(answer.features))) if answer.model else None,
        }
        common.print_output(data, output_format, _print_cpu_baseline)
        return common.EXIT_OK if answer.model else common.EXIT_NO

    @common.args('host', metavar='HOST', help="Compute host name.")
    @common.args('--reason', required=True,
                 help="Why (shown to operators; at most 255 characters).")
    @common.format_option
    @common.guarded
    def disable(self, host, reason, output_format='human'):
        """Disable a host for maintenance: the scheduler chooses it no more.

        Its guests stay; migrations and new guests are no longer sent
        there (a migration naming it is refused), and host list/show
        give the reason. Disabling again keeps since when and takes the
        new reason. Exit codes: 0 disabled; 127 unknown host or a bad
        reason (nothing changed); 255 the conductor cannot be reached.
        """
        _check_reason(reason)
        return _set_disabled(host, True, output_format, reason=reason)

    @common.args('host', metavar='HOST', help="Compute host name.")
    @common.format_option
    @common.guarded
    def enable(self, host, output_format='human'):
        """Enable a host again after maintenance; idempotent.

        Exit codes: 0 enabled (also when it was); 127 unknown host; 255
        the conductor cannot be reached.
        """
        return _set_disabled(host, False, output_format)

    @common.args('host', metavar='HOST', help="Compute host name.")
    @common.args('--node', type=int, required=True, metavar='P',
                 help="Host NUMA node to free memory on.")
    @common.args('--size', type=int, required=True, metavar='MiB',
                 help="How much to free there.")
    @common.args('--exact', action='store_true', default=False,
                 help="Take memory only from guest nodes backed by node P "
                      "(possibly short of --size).")
    @common.args('--dry-run', dest='dry_run', action='store_true',
                 default=False, help="Show the plan; change nothing.")
    @common.format_option
    @common.guarded
    def reclaim(self, host, node=None, size=None, exact=False,
                dry_run=False, output_format='human'):
        """Free memory on one host node from the guests' virtio-mem devices.

        Guests whose devices node P backs give first, the one with most
        plugged there first, each at most [virtio_mem] max_loss_mb;
        without --exact what P cannot give comes from the same guests'
        other nodes. Prints what was freed on P, elsewhere and as best
        effort (guest nodes backed by several host nodes); host memory
        is released only by what the guests really unplugged. Exit
        codes: 0 freed (or planned) in full; 1 short of --size or a
        guest did not answer in time; 127 bad input or unknown host
        (nothing changed); 255 the conductor cannot be reached.
        """
        _memory.check(node, size, minimum=1)
        with _access.database() as db:
            _known(db, host)
        return _memory.run('host_reclaim', output_format, host=host,
                           node=node, size_mb=size, exact=exact,
                           dry_run=dry_run)

    @common.args('words', nargs='+', metavar='[show|abort] HOST',
                 help="The host to drain; 'show HOST' prints its drain, "
                      "'abort HOST' aborts it.")
    @common.args('--dry-run', dest='dry_run', action='store_true',
                 help="Compute and show the plan; move nothing.")
    @common.args('--to', metavar='HOST,...',
                 help="Choose destinations among these hosts only.")
    @common.args('--keep-free-nodes', dest='keep_free_nodes', type=int,
                 default=0, metavar='N',
                 help="Leave N whole NUMA nodes free on every destination "
                      "(of its idle nodes, the highest-numbered).")
    @common.args('--parallel', type=int, default=None, metavar='N',
                 help="Moves at once (default: [conductor] "
                      "drain_parallel).")
    @common.args('--wait', action='store_true', default=False,
                 help="Follow the drain, guest by guest, until it ends.")
    @common.args('--timeout', type=float, default=None, metavar='SECONDS',
                 help="With --wait: stop following after SECONDS and exit "
                      "1 (the drain goes on).")
    @common.args('--abort-running', dest='abort_running',
                 action='store_true', default=False,
                 help="With abort: abort running migrations too (default: "
                      "they finish).")
    @common.format_option
    @common.guarded
    def drain(self, words, dry_run=False, to=None, keep_free_nodes=0,
              parallel=None, wait=False, timeout=None, abort_running=False,
              output_format='human'):
        """Empty a host by a plan: every guest placed at once, then moved.

        Before anything moves, a destination and the exact placement
        (cells, pins, page sizes) for every guest, honouring its
        policies, the per-cell limits, disabled hosts and admission;
        the hardest guests are placed first and alternatives searched,
        so a drain that is possible is found (doc/source/drain.rst).
        With --dry-run only the plan is printed. Without it the host is
        disabled, the plan reserved and the moves run through the
        admission queue (--parallel at once); --wait follows them.
        'drain show HOST' prints the host's drain, 'drain abort HOST'
        cancels its pending moves. Exit codes: 0 the host can be (or
        was) emptied, or shown/aborted; 1 it cannot (nothing moved),
        or with --wait the drain ended with failures, was aborted or
        did not end within --timeout; 127 unknown host or drain, a
        drain already running, bad input (nothing changed); 255 the
        conductor cannot be reached.
        """
        action, host = _drain_words(words)
        _check_drain_words_options(action, dry_run, to, keep_free_nodes,
                                   parallel, wait, timeout, abort_running)
        if action == 'show':
            return _drain_run_output.show_drain(host, output_format)
        if action == 'abort':
            return _drain_run_output.abort(host, abort_running,
                                           output_format)
        destinations = _host_names(to)
        _check_drain_options(keep_free_nodes, parallel, wait, timeout,
                             dry_run)
        with _access.database() as db:
            _known(db, host)
            for name in destinations or ():
                _known(db, name)
        if not dry_run:
            return _drain_run_output.start(
                host, destinations, keep_free_nodes,
                parallel or CONF.conductor.drain_parallel, wait, timeout,
                output_format)
        answer = _access.conductor().host_drain_plan(
            _access.context(), host, to=destinations,
            keep_free_nodes=keep_free_nodes)
        data = _drain_output.plain(answer)
        common.print_output(data, output_format, _drain_output.show)
        if data['emptiable']:
            return common.EXIT_OK
        # stderr only: stdout already holds the plan.
        return common.fail(_drain_output.why_not(data), common.EXIT_NO)


    @common.args('--for', dest='flavor', required=True,
                 metavar='vcpus=N,memory_mb=N,KEY=VALUE,...',
                 help="The guest to make room for: its size and extra "
                      "specs, e.g. vcpus=8,memory_mb=16384,"
                      "hw:cpu_policy=dedicated,hw:numa_nodes=1.")
    @common.args('--hosts', metavar='HOST,...',
                 help="Make room on one of these hosts only.")
    @common.args('--max-moves', dest='max_moves', type=int, default=3,
                 metavar='N', help="Most migrations to consider (0-8).")
    @common.args('--dry-run', dest='dry_run', action='store_true',
                 help="Compute and show the plan; move nothing.")
    @common.args('--execute', action='store_true',
                 help="Carry the plan out like a drain: reserved, moved "
                      "through the admission queue; 'drain show HOST' "
                      "and 'drain abort HOST' serve it.")
    @common.args('--parallel', type=int, default=None, metavar='N',
                 help="With --execute: moves at once (default: "
                      "[conductor] drain_parallel).")
    @common.args('--wait', action='store_true', default=False,
                 help="With --execute: follow the moves until the end "
                      "and the room is looked for.")
    @common.args('--timeout', type=float, default=None, metavar='SECONDS',
                 help="With --wait: stop following after SECONDS and exit "
                      "1 (the defragmentation goes on).")
    @common.format_option
    @common.guarded
    def defragment(self, flavor, hosts=None, max_moves=3, dry_run=False,
                   execute=False, parallel=None, wait=False, timeout=None,
                   output_format='human'):
        """Find, and with --execute make, the fewest migrations that make
        room for a guest.

        Plans are tried by increasing number of moves on every host (or
        those of --hosts): guests of the host, and, in chains, guests of
        third hosts that make room for them, each placed elsewhere at
        once; the plan is printed with the guest's placement
        (doc/source/drain.rst). --execute carries it out like a drain
        (the host stays enabled): the plan and the room are reserved,
        the moves run through the admission queue at the drain priority,
        a refused move is planned again; --wait follows it until the
        room is looked for. Exit codes: 0 room can be made (or exists),
        or with --execute was started (with --wait: made); 1 no plan
        within --max-moves makes room (nothing moved), or with --wait it
        failed, was aborted, did not end within --timeout or the room is
        not there; 127 bad input, an unknown host, a guest that fits on
        no host even empty, a drain or defragmentation of the host
        running (nothing changed); 255 the conductor cannot be reached.
        """
        if dry_run == execute:
            raise exception.Invalid(
                reason="give one of --dry-run (show the plan) and "
                       "--execute (carry it out)")
        _check_drain_options(0, parallel, wait, timeout, dry_run,
                             starts='--execute')
        vcpus, memory_mb, specs = _defragment_output.parse_spec(flavor)
        names = _host_names(hosts, option='--hosts')
        if not 0 <= max_moves <= 8:
            raise exception.Invalid(
                reason=f"--max-moves must be 0 to 8, got {max_moves}")
        with _access.database() as db:
            for name in names or ():
                _known(db, name)
        if execute:
            return _drain_run_output.defragment(
                vcpus, memory_mb, specs, names, max_moves,
                parallel or CONF.conductor.drain_parallel, wait, timeout,
                output_format)
        answer = _access.conductor().host_defragment_plan(
            _access.context(), vcpus, memory_mb, specs, hosts=names,
            max_moves=max_moves)
        data = _defragment_output.plain(answer)
        data['unread_keys'] = _defragment_output.unread_keys(specs)
        common.print_output(data, output_format, _defragment_output.show)
        if data['found']:
            return common.EXIT_OK
        return common.fail(f"no room for the guest: {data['reason']}",
                           common.EXIT_NO)


def _drain_words(words):
    """(None|'show'|'abort', HOST) from ``drain``'s positional words."""
    if len(words) == 1 and words[0] in ('show', 'abort'):
        # Not a host named 'show': the HOST was forgotten.
        raise exception.Invalid(
            reason=f"'drain {words[0]}' needs the host: 'drain {words[0]} "
                   f"HOST'")
    if len(words) == 1:
        return None, words[0]
    if len(words) == 2 and words[0] in ('show', 'abort'):
        return words[0], words[1]
    raise exception.Invalid(
        reason=f"drain takes HOST, 'show HOST' or 'abort HOST', got "
               f"{' '.join(words)!r}")


def _check_drain_words_options(action, dry_run, to, keep_free_nodes,
                               parallel, wait, timeout, abort_running):
    """Refuse an option the chosen form of ``drain`` would ignore (an
    ignored --abort-running started a drain; an ignored --wait on 'show'
    or 'abort' followed nothing)."""
    given = [name for name, value in (
        ('--dry-run', dry_run), ('--to', to is not None),
        ('--keep-free-nodes', keep_free_nodes),
        ('--parallel', parallel is not None), ('--wait', wait),
        ('--timeout', timeout is not None)) if value]
    if action is not None and given:
        raise exception.Invalid(
            reason=f"'drain {action} HOST' takes no {', '.join(given)}: "
                   f"they are for starting a drain ('drain HOST')")
    if abort_running and action != 'abort':
        raise exception.Invalid(
            reason="--abort-running is for 'drain abort HOST'; nothing was "
                   "started")


def _check_drain_options(keep_free_nodes, parallel, wait, timeout, dry_run,
                         starts='a drain that moves guests'):
    """:param starts: what --wait and --parallel need, as the action
        words it."""
    if not 0 <= keep_free_nodes <= 64:
        raise exception.Invalid(
            reason=f"--keep-free-nodes must be 0 to 64, got "
                   f"{keep_free_nodes}")
    if parallel is not None and not 1 <= parallel <= 64:
        raise exception.Invalid(
            reason=f"--parallel must be 1 to 64, got {parallel}")
    if dry_run and (wait or parallel is not None):
        raise exception.Invalid(
            reason=f"--wait and --parallel need {starts}; --dry-run moves "
                   f"nothing")
    if timeout is not None and not (wait and 0 < timeout <= 86400):
        raise exception.Invalid(
            reason=f"--timeout {timeout:g} needs --wait and a number of "
                   f"seconds above 0, at most 86400")


def _cpu_entry(cpu):
    """A host's reported CPU as ``host show`` prints it; None where its
    agent reports none (release 1)."""
    if cpu is None:
        return None
    return {name: (dict(value) if isinstance(value, dict) else
                   list(value) if isinstance(value, list) else value)
            for name, value in ((n, cpu.get(n)) for n in cpu.fields)}


def _cpu_power_entry(power):
    """A host's CPU power management as ``host show`` prints it; None
    where its agent reports none."""
    if power is None:
        return None
    return {'strategy': power.strategy,
            'governor_low': power.governor_low,
            'failed': sorted(power.failed),
            'cells': {str(cell.id): {
                'managed': sorted(cell.managed),
                'powered_down': sorted(cell.powered_down)}
                for cell in power.cells}}


def _print_cpu_power(power):
    if power is None:
        print("CPU power management: not reported")
        return
    if power['strategy'] == 'off':
        print("CPU power management: off")
        return
    how = ('offline' if power['strategy'] == 'cpu_state'
           else f"governor {power['governor_low']}")
    print(f"CPU power management: {power['strategy']} (unused dedicated "
          f"pCPUs {how})")
    for cell_id, cell in power['cells'].items():
        down = cpuspec.format_cpu_spec(cell['powered_down']) or 'none'
        print(f"  cell {cell_id}: powered down {down} of managed "
              f"{cpuspec.format_cpu_spec(cell['managed']) or 'none'}")
    if power['failed']:
        print(f"  could not set pCPUs "
              f"{cpuspec.format_cpu_spec(power['failed'])} (see the "
              f"agent's log)")


def _cpu_row(name, cpu):
    return {'host': name, 'arch': cpu.arch, 'model': cpu.model,
            'host_model': cpu.host_model,
            'features': len(set(cpu.features) |
                            set(cpu.host_model_features)),
            'custom_models': len(cpu.custom_models)}


def _print_cpu_baseline(data):
    print(f"{'HOST':<20} {'ARCH':<8} {'MODEL':<24} {'HOST-MODEL':<24} "
          f"{'FEATURES':>8} {'MODELS':>6}")
    for row in data['hosts']:
        print(f"{row['host']:<20} {row['arch'] or '-':<8} "
              f"{row['model'] or '-':<24} {row['host_model'] or '-':<24} "
              f"{row['features']:>8} {row['custom_models']:>6}")
    print()
    if data['model']:
        print(f"Baseline: {data['model']} ({data['note']})")
    else:
        print(f"No baseline model: {data['note']}")
    print(f"Features all report: {', '.join(data['features']) or '-'}")
    print(f"Models usable on all: {', '.join(data['common_models']) or '-'}")
    if data['cpu_xml']:
        print(f"Guest CPU: {data['cpu_xml']}")


def _set_disabled(host, disabled, output_format, **reason):
    """Ask the conductor to disable or enable a known host; print it."""
    with _access.database() as db:
        _known(db, host)
    answer = _access.conductor().host_set_disabled(
        _access.context(), host, disabled, **reason)
    common.print_output(answer, output_format, _print_maintenance)
    return common.EXIT_OK


def _known(db, host):
    """Raise HostNotFound (127) for a host that never reported."""
    from numamig.db import compute_nodes
    compute_nodes.get(db, host)


def _check_reason(reason):
    if not reason.strip() or len(reason) > 255:
        raise exception.Invalid(
            reason=f"--reason must be 1 to 255 characters, got "
                   f"{len(reason.strip())}")


def _host_names(text, option='--to'):
    """The host names of ``--to``, or None when it is not given."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(',')]
    if not all(names):
        raise exception.Invalid(
            reason=f"{option} must list host names separated by commas, "
                   f"got {text!r}")
    return sorted(set(names))


def _print_maintenance(data):
    if data['disabled']:
        print(f"Host {data['host']} disabled since {data['disabled_at']}: "
              f"{data['reason']}")
    else:
        print(f"Host {data['host']} enabled.")


def report_age(report, now=None):
    """Seconds since a ComputeNodeReport was made."""
    now = now or datetime.datetime.now(datetime.UTC)
    reported = report.reported_at
    if reported.tzinfo is None:
        reported = reported.replace(tzinfo=datetime.UTC)
    return max(0.0, (now - reported).total_seconds())


def _host_row(report, instance_count, maintenance=None):
    age = report_age(report)
    disabled = maintenance is not None
    return {
        'host': report.host,
        'state': 'up' if age <= CONF.service_down_time else 'down',
        'service_version': report.service_version,
        'hypervisor': f"{report.hypervisor_type} {report.hypervisor_uri}",
        'report_age_s': round(age, 1),
        'instances': instance_count,
        'disabled': disabled,
        'disabled_at': (maintenance.disabled_at.isoformat() if disabled
                        else None),
        'disabled_reason': maintenance.reason if disabled else None,
        'cells': {str(c.id): _cell_free(c) for c in report.topology.cells},
        'summary': ' | '.join(pictures.cell_summary(c) for c in
                              sorted(report.topology.cells,
                                     key=lambda c: c.id)),
    }


def _distances(topology):
    """The distance table placement uses, {cell: {cell: distance}}, and
    whether it is assumed: libvirt reports no entry for some pair, which
    placement takes as local 10, remote 20 (numa/distance.py)."""
    from numamig.numa import distance
    cells = list(topology.cells)
    table = distance.assumed_table(cells)
    return {'table': {str(a): {str(b): value for b, value in row.items()}
                      for a, row in table.items()},
            'assumed': len(cells) > 1 and bool(distance.missing(cells))}


def _cell_free(cell):
    return {'dedicated_pcpus': len(cell.pcpuset),
            'free_pcpus': len(cell.free_pcpus),
            'pages': {str(p.size_kb): {'total': p.total, 'free': p.free}
                      for p in cell.mempages}}


def _list_through_orm():
    """``list``'s [(report, maintenance)] and {host: instances} through
    numamig.db's repositories, where numamig.db.direct does not serve the
    database URL or a report's stored version."""
    from numamig.db import compute_nodes
    from numamig.db import instances
    with _access.database() as db:
        reports = compute_nodes.get_all(db)
        counts = _instance_counts(instances.get_all(db))
        disabled = compute_nodes.maintenance(db)
    return [(r, disabled.get(r.host)) for r in reports], counts


def _instance_counts(records):
    counts = {}
    for record in records:
        host = record.instance.host
        counts[host] = counts.get(host, 0) + 1
    return counts


def _guest_entry(instance):
    return {'uuid': instance.uuid, 'name': instance.name,
            'placement': pictures.placement_lines(
                instance.get('numa_topology'))}


def _claim_entry(instance):
    context = instance.migration_context
    return {'instance_uuid': instance.uuid, 'name': instance.name,
            'migration_uuid': context.migration_uuid,
            'source_host': context.source_host,
            'placement': pictures.placement_lines(
                context.get('new_numa_topology'))}


def _print_list(data):
    if not data['hosts']:
        print("No compute host has reported yet.")
        return
    print(f"{'HOST':<16} {'STATE':<5} {'VER':>3} {'AGE':>7} {'GUESTS':>6}  "
          f"FREE PER CELL (pCPUs, huge pages)")
    for row in data['hosts']:
        print(f"{row['host']:<16} {row['state']:<5} "
              f"{row['service_version']:>3} {_age(row['report_age_s']):>7} "
              f"{row['instances']:>6}  {row['summary']}"
              + (f"  DISABLED: {row['disabled_reason']}"
                 if row['disabled'] else ''))


def _print_show(data, report):
    print(f"Host {data['host']}: {data['state']}, service version "
          f"{data['service_version']}, {data['hypervisor']}, reported "
          f"{_age(data['report_age_s'])} ago")
    if data['disabled']:
        print(f"Disabled for maintenance since {data['disabled_at']}: "
              f"{data['disabled_reason']}")
    cpu = data['cpu']
    if not cpu:
        print("CPU: not reported (an agent of release 1)")
    elif not (cpu['host_model'] or cpu['custom_models']):
        print(f"CPU: {cpu['model'] or '-'}, no domain capabilities reported "
              f"(no host-model or usable models: libvirt's test driver "
              f"has none)")
    else:
        print(f"CPU: {cpu['model'] or '-'}, host-model "
              f"{cpu['host_model'] or '-'} "
              f"(+{len(cpu['host_model_features'])} features), "
              f"{len(cpu['custom_models'])} usable models")
    for line in pictures.host_lines(report.topology):
        print(f"  {line}")
    _print_cpu_power(data['cpu_power'])
    _print_pci(data['pci_devices'], data['pci_per_node'])
    for node, entry in data['virtio_mem'].items():
        print(f"  node {node}: virtio-mem {entry['devices']} devices, "
              f"reclaimable {entry['reclaimable_mb']} MiB, growable "
              f"{entry['growable_mb']} MiB")
    names = {g['uuid']: g['name'] for g in data['guests']}
    for line in _locality.host_lines(data['locality'], names):
        print(line)
    print(f"Guests ({len(data['guests'])}):")
    for guest in data['guests']:
        print(f"  {guest['name']} {guest['uuid']}")
        for line in guest['placement']:
            print(f"    {line}")
    if data['claims']:
        print(f"Incoming move claims ({len(data['claims'])}):")
    for claim in data['claims']:
        print(f"  {claim['name']} {claim['instance_uuid']} from "
              f"{claim['source_host']} (migration "
              f"{claim['migration_uuid']})")
        for line in claim['placement']:
            print(f"    {line}")


def _print_nrt(data):
    from numamig.numa import distance
    from numamig.scheduler import nrt
    print(f"{data['kind']} {data['metadata']['name']} "
          f"({data['apiVersion']})")
    print(f"  {'ZONE':<8} {'RESOURCE':<16} {'CAPACITY':>14} "
          f"{'ALLOCATABLE':>14} {'AVAILABLE':>14}")
    for zone in data['zones']:
        for res in zone['resources']:
            print(f"  {zone['name']:<8} {res['name']:<16} "
                  f"{res['capacity']:>14} {res['allocatable']:>14} "
                  f"{res['available']:>14}")
    # Costs as `host show` draws distances: assumed ones marked *.
    assumed_any = False
    for zone in data['zones']:
        if not zone.get('costs'):
            continue
        attributes = {a['name']: a['value'] for a in zone['attributes']}
        assumed = set(filter(None, attributes.get(
            nrt.ASSUMED_COSTS, '').split(',')))
        assumed_any = assumed_any or bool(assumed)
        print(f"  {zone['name']:<8} costs " + ' '.join(
            f"{cost['name']}:{cost['value']}"
            f"{'*' if cost['name'] in assumed else ''}"
            for cost in zone['costs']))
    if assumed_any:
        print(f"  (costs marked * are assumed: libvirt reports no such "
              f"distance; local {distance.LOCAL}, remote "
              f"{distance.REMOTE})")


def _age(seconds):
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def _pci_entries(topology):
    """The host's assignable PCI functions, for ``host show``: address,
    kind, PF, node, the guest holding it, and whether a new guest may
    take it."""
    from numamig.numa import pci
    host_devices = topology.get('pci_devices') or ()
    blocked = pci.unavailable(pci.devices_of(host_devices),
                              pci.held_addresses(host_devices))
    return [{'address': d.address, 'vendor_id': d.vendor_id,
             'product_id': d.product_id, 'dev_type': d.dev_type,
             'parent_addr': d.get('parent_addr'),
             'numa_node': d.get('numa_node'),
             'instance_uuid': d.get('instance_uuid'),
             'free': d.address not in blocked} for d in host_devices]


def _pci_per_node(topology):
    """{node ('-': unknown): {'total', 'free'}} of the host's functions:
    what each cell offers guests asking for devices."""
    from numamig.numa import pci
    counts = pci.counts_per_node(topology.get('pci_devices') or ())
    return {('-' if node is None else str(node)): {'total': total,
                                                   'free': free}
            for node, (total, free) in sorted(
                counts.items(), key=lambda item: (item[0] is None,
                                                  item[0] or 0))}


def _print_pci(entries, per_node):
    if not entries:
        return
    free = sum(1 for e in entries if e['free'])
    print(f"PCI devices ({len(entries)}, {free} free; per node free/total: "
          + ', '.join(f"{node}: {c['free']}/{c['total']}"
                      for node, c in per_node.items()) + "):")
    for e in entries:
        node = '-' if e['numa_node'] is None else e['numa_node']
        pf = f" of {e['parent_addr']}" if e['parent_addr'] else ''
        state = ('free' if e['free'] else
                 f"held by {e['instance_uuid']}" if e['instance_uuid']
                 else 'blocked (its PF or a VF is held)')
        print(f"  {e['address']} {e['vendor_id']}:{e['product_id']} "
              f"{e['dev_type']}{pf} node {node}: {state}")
