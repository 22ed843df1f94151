"""Redelivery rows of the conductor's RPC methods (one or more each)."""

import datetime

import fixtures
from oslo_utils import timeutils

from numamig.compute import report
from numamig.conductor import records
from numamig.db import compute_nodes
from numamig.db import migration_satellites
from numamig.db import migration_threads
from numamig.db import migrations
from tests.functional.redelivery import rows
from tests.functional.redelivery.world import Delivery

# A fixed migration uuid: what a client sends with its request.
REQUEST_UUID = '9a3f1c5e-2b7d-4e8a-9c61-0d4f7b2e8a15'


def _to(method, **kwargs):
    return Delivery('conductor', method, kwargs)


# A fixed memory change uuid: what numamig-manage sends with a request.
CHANGE_UUID = '5c0de000-18aa-4bbb-8ccc-000000000018'


def _memory_set(world):
    guest = world.vmem_guest()
    return _to('instance_memory_set', change_uuid=CHANGE_UUID,
               instance_uuid=guest.uuid, node=0, size_mb=256, exact=True,
               dry_run=False)


def _host_reclaim(world):
    world.vmem_guest()
    return _to('host_reclaim', change_uuid=CHANGE_UUID, host='host-a',
               node=1, size_mb=100, exact=False, dry_run=False)


def _report_of(world, host):
    return report.build(world.dep.agent(host).agent)


def _maintenance(world):
    return compute_nodes.maintenance(world.dep.db)


def _drain_plan(world):
    world.guest()
    return _to('host_drain_plan', host='host-a')


def _planned(world):
    plan = world.dep.conductor.manager.host_drain_plan(
        world.dep.context, host='host-a')
    return sorted((move['instance_uuid'], move['dest_host'])
                  for move in plan['moves'])


DRAIN_UUID = '5c0e2f4a-7d1b-4f3e-9a28-6b1d0c7e9f42'


def _held_drain(world, start=True):
    """A guest on host-a and, with ``start``, its drain recorded with
    the driver held (the move stays pending: nothing runs between the
    two deliveries)."""
    world.test.useFixture(fixtures.MockPatchObject(
        world.dep.conductor.manager.drains, 'run_once'))
    world.guest()
    if start:
        world.dep.conductor.manager.host_drain_start(
            world.dep.context, host='host-a', drain_uuid=DRAIN_UUID,
            parallel=1)


def _drain_start(world):
    _held_drain(world, start=False)
    return _to('host_drain_start', host='host-a', drain_uuid=DRAIN_UUID,
               parallel=1)


def _drain_show(world):
    _held_drain(world)
    return _to('host_drain_show', host='host-a')


def _drain_wait(world):
    _held_drain(world)
    shown = world.dep.conductor.manager.host_drain_show(
        world.dep.context, drain_uuid=DRAIN_UUID)
    return _to('host_drain_wait', drain_uuid=DRAIN_UUID,
               signature=shown['signature'], wait_s=0)


def _drain_abort(world):
    _held_drain(world)
    return _to('host_drain_abort', host='host-a')


def _defragment_plan(world):
    world.guest()
    return _to('host_defragment_plan', vcpus=2, memory_mb=512,
               extra_specs={'hw:cpu_policy': 'dedicated'})


DEFRAGMENT_UUID = '8e3f1a2b-4c5d-4e6f-8a7b-9c0d1e2f3a4b'


def _defragment_start(world):
    """A guest on host-a; room for another asked (found with no move:
    the defragmentation is recorded and held, its driver too)."""
    world.test.useFixture(fixtures.MockPatchObject(
        world.dep.conductor.manager.drains, 'run_once'))
    world.guest()
    return _to('host_defragment_start', vcpus=2, memory_mb=512,
               extra_specs={'hw:cpu_policy': 'dedicated'},
               drain_uuid=DEFRAGMENT_UUID, parallel=1)


def _reported(world):
    return world.stored_report('host-a')


def _report(world):
    # Reports travel with whole seconds: one made a second later than
    # the one stored at start is surely newer.
    newer = _report_of(world, 'host-a')
    newer.reported_at += datetime.timedelta(seconds=1)
    return _to('report_compute_node', report=newer)


def _older_report(world):
    older = _report_of(world, 'host-a')
    older.reported_at -= datetime.timedelta(seconds=1)
    world.guest('host-a')   # the build stores a newer report of host-a
    return _to('report_compute_node', report=older)


def _guest_read(method, key='instance_uuid'):
    def setup(world):
        return _to(method, **{key: world.guest().uuid})
    return setup


def _migration_get(world):
    migration, _ = world.claimed(world.guest())
    return _to('migration_get', migration_uuid=migration.uuid)


def _migration_get_satellites(world):
    migration, _ = world.claimed(world.guest())
    migration_threads.record_threads(world.dep.db, migration.uuid, 'source',
                                     _THREADS)
    return _to('migration_get_satellites', migration_uuid=migration.uuid,
               names=['reclaim', 'threads'])


def _migration_get_with_satellites(world):
    # The agents' read of a migration with its convergence and recovery
    # (records API), as a resume makes it.
    migration, _ = world.running(world.guest())
    migration_satellites.record_recovery(world.dep.db, migration.uuid,
                                         _RECOVERY)
    return _to('migration_get_with_satellites',
               migration_uuid=migration.uuid,
               names=['convergence', 'recovery'])


def _migration_wait(world):
    migration, _ = world.claimed(world.guest())
    return _to('migration_wait', migration_uuid=migration.uuid,
               status='accepted', memory_processed=0, timeout=1)


def _migration_get_all(world):
    migration, _ = world.claimed(world.guest())
    return _to('migration_get_all', instance_uuid=migration.instance_uuid,
               status=None, host=None)


def _claims_on_host(world):
    world.claimed(world.guest())
    return _to('instance_get_claims_on_host', host='host-b')


def _in_progress(world):
    world.claimed(world.guest())
    return _to('migration_get_in_progress_by_host', host='host-a')


def _set_placement(world):
    guest = world.guest()
    rows.unplaced(world, guest)
    return _to('instance_set_placement', instance_uuid=guest.uuid,
               host='host-a', numa_topology=guest.numa_topology)


def _instance_update(world):
    return _to('instance_update', instance_uuid=world.guest().uuid,
               values={'power_state': 'shutdown'})


def _set_failed(world):
    migration, _ = world.claimed(world.guest())
    return _to('migration_set_status', migration_uuid=migration.uuid,
               status='failed', detail=None, error='the copy failed',
               result=None)


def _running_after_completed(world):
    migration = world.completed(world.guest())
    return _to('migration_set_status', migration_uuid=migration.uuid,
               status='running', detail=None, error=None, result=None)


def _complete(world):
    migration = world.counted(world.guest())
    return _to('migration_complete', migration_uuid=migration.uuid,
               result={'emulated': True, 'elapsed_ms': 12},
               detail='copied')


def _progress(world):
    migration, _ = world.running(world.guest())
    return _to('migration_update_progress', migration_uuid=migration.uuid,
               progress={'memory_total': 1000, 'memory_processed': 400})


def _older_progress(world):
    migration, _ = world.running(world.guest())
    migrations.update_progress(world.dep.db, migration.uuid,
                               memory_total=1000, memory_processed=700)
    return _to('migration_update_progress', migration_uuid=migration.uuid,
               progress={'memory_total': 1000, 'memory_processed': 400})


_RECOVERY = [{'event': 'link-lost', 'at': 't1', 'attempt': None,
              'detail': 'stream broke'},
             {'event': 'resume-failed', 'at': 't2', 'attempt': 1,
              'detail': 'Connection refused'}]


def _recovery(world):
    migration, _ = world.running(world.guest())
    return _to('migration_record_recovery', migration_uuid=migration.uuid,
               history=_RECOVERY)


def _older_recovery(world):
    migration, _ = world.running(world.guest())
    migration_satellites.record_recovery(world.dep.db, migration.uuid,
                                         _RECOVERY)
    return _to('migration_record_recovery', migration_uuid=migration.uuid,
               history=_RECOVERY[:1])


_THREADS = {'host': 'host-a', 'basis': 'shared-guest-nodes',
            'cpus': [1], 'connections': 2,
            'threads': {'live_migration': [1], 'multifdsend_0': [1]}}


def _threads(world):
    migration, _ = world.running(world.guest())
    return _to('migration_record_threads', migration_uuid=migration.uuid,
               side='source', record=_THREADS)


def _threads_after_completion(world):
    # The destination's report may come after the source completed it.
    migration, _ = world.running(world.guest())
    migration_threads.record_threads(world.dep.db, migration.uuid, 'dest',
                                     dict(_THREADS, host='host-b'))
    return _to('migration_record_threads', migration_uuid=migration.uuid,
               side='dest', record=dict(_THREADS, host='host-b'))


_DEVICES = [{'alias': 'nic', 'address': '0000:82:00.0', 'guest_cell': '1',
             'cell_nodes': '1', 'device_node': '1', 'plugged': 'yes',
             'local': 'yes'}]


def _devices(world):
    migration, _ = world.running(world.guest())
    return _to('migration_record_devices', migration_uuid=migration.uuid,
               host='host-b', devices=_DEVICES)


def _devices_after_completion(world):
    # The destination verifies after the arrival: the source may have
    # recorded the migration completed first, and a redelivered arrival
    # verifies again.
    migration, _ = world.running(world.guest())
    migration_satellites.record_devices(world.dep.db, migration.uuid,
                                        'host-b', _DEVICES)
    return _to('migration_record_devices', migration_uuid=migration.uuid,
               host='host-b', devices=_DEVICES)


def _context_of(world, guest):
    migration = world.admitted(guest)
    answer = world.compute_api().check_can_live_migrate_destination(
        world.ctxt, world.record(guest.uuid), 'host-b',
        **_dest_kwargs(world, guest, migration))
    return answer.migration_context


def _dest_kwargs(world, guest, migration):
    kwargs = rows.dest_answer(world, guest, migration)
    return {'migration': kwargs['migration'], 'limits': None,
            'source_data': kwargs['source_data']}


def _context_set(world):
    return _to('migration_context_set',
               context=_context_of(world, world.guest()))


def _context_set_after_failed(world):
    guest = world.guest()
    migration, _ = world.claimed(guest)
    context = world.record(guest.uuid).migration_context
    records.set_status(world.worker, migration.uuid, 'failed',
                       error='the copy failed')
    return _to('migration_context_set', context=context)


def _context_drop(world):
    migration, _ = world.claimed(world.guest())
    return _to('migration_context_drop',
               instance_uuid=migration.instance_uuid,
               migration_uuid=migration.uuid, dest_host='host-b')


def _drop_after_apply(world):
    migration = world.completed(world.guest())
    return _to('migration_context_drop',
               instance_uuid=migration.instance_uuid,
               migration_uuid=migration.uuid, dest_host='host-b')


def _context_apply(world):
    migration, _ = world.claimed(world.guest())
    return _to('migration_context_apply',
               instance_uuid=migration.instance_uuid,
               migration_uuid=migration.uuid)


def _apply_after_drop(world):
    migration, _ = world.claimed(world.guest())
    world.agents.migration_context_drop(world.ctxt,
                                        migration.instance_uuid,
                                        migration.uuid)
    return _to('migration_context_apply',
               instance_uuid=migration.instance_uuid,
               migration_uuid=migration.uuid)


def _live_migrate(world):
    return _to('live_migrate_instance', instance_uuid=world.guest().uuid,
               dest_host=None, priority=None, migration_uuid=REQUEST_UUID)


def _dry_run(world):
    return _to('live_migration_dry_run', instance_uuid=world.guest().uuid,
               dest_host=None)


def _abort_waiting(world):
    return _to('migration_abort',
               migration_uuid=world.admitted(world.guest()).uuid)


def _abort_running(world):
    return _to('migration_abort',
               migration_uuid=world.blocked(world.guest()).uuid)


def _force_complete(world):
    return _to('migration_force_complete',
               migration_uuid=world.blocked(world.guest()).uuid)


def _resume(world):
    """A postcopy-paused migration (as a source whose recovery gave up
    leaves it) and the operator's resume of that pause. The embedded
    source has no post-copy and refuses; the repeat is known by its
    pause count and changes nothing more."""
    migration, _data = world.running(world.guest())
    records.set_status(world.worker, migration.uuid, 'postcopy-paused',
                       error='the guest is PAUSED')
    return _to('migration_resume', migration_uuid=migration.uuid, pauses=1)


def _instance_create(world):
    return _to('instance_create', instance=rows.new_instance(),
               host='host-a')


def _instance_adopt(world):
    rows.unrecorded_guest(world)
    return _to('instance_adopt', host='host-a')


def _instance_delete(world):
    return _to('instance_delete', instance_uuid=world.guest().uuid)


def _node_delete(world):
    gone = _report_of(world, 'host-a')
    gone.host = 'host-gone'
    gone.reported_at = timeutils.utcnow(with_timezone=True).replace(
        year=2020)
    compute_nodes.save_report(world.dep.db, gone)
    return _to('compute_node_delete', host='host-gone')


def _heal(world):
    rows.leaked(world, world.guest())
    return _to('heal_claims', dry_run=False)


ROWS = [
    rows.read('conductor', 'ping', lambda world: _to('ping')),
    rows.Row('conductor', 'report_compute_node', _report, extra=_reported,
             rabbit=True),
    rows.Row('conductor', 'report_compute_node', _older_report,
             variant='older-than-stored', stale=True, extra=_reported,
             rabbit=True),
    rows.read('conductor', 'instance_get', _guest_read('instance_get')),
    rows.read('conductor', 'instance_get_all',
              lambda world: _to('instance_get_all',
                                host=world.guest().host)),
    rows.read('conductor', 'instance_get_claims_on_host', _claims_on_host),
    rows.Row('conductor', 'instance_set_placement', _set_placement),
    rows.Row('conductor', 'instance_update', _instance_update),
    rows.read('conductor', 'migration_get', _migration_get),
    rows.read('conductor', 'migration_get_satellites',
              _migration_get_satellites),
    rows.read('conductor', 'migration_get_with_satellites',
              _migration_get_with_satellites),
    rows.read('conductor', 'migration_wait', _migration_wait),
    rows.read('conductor', 'migration_get_in_progress_by_host',
              _in_progress),
    rows.Row('conductor', 'migration_set_status', _set_failed,
             rabbit=True),
    rows.Row('conductor', 'migration_set_status', _running_after_completed,
             variant='after-completed', stale=True, rabbit=True),
    rows.Row('conductor', 'migration_complete', _complete, rabbit=True),
    rows.Row('conductor', 'migration_update_progress', _progress),
    rows.Row('conductor', 'migration_update_progress', _older_progress,
             variant='older-sample', stale=True),
    rows.Row('conductor', 'migration_record_recovery', _recovery),
    rows.Row('conductor', 'migration_record_recovery', _older_recovery,
             variant='older-report', stale=True),
    rows.Row('conductor', 'migration_record_threads', _threads),
    rows.Row('conductor', 'migration_record_threads',
             _threads_after_completion, variant='recorded', stale=True),
    rows.Row('conductor', 'migration_record_devices', _devices),
    rows.Row('conductor', 'migration_record_devices',
             _devices_after_completion, variant='recorded', stale=True),
    rows.Row('conductor', 'migration_context_set', _context_set,
             rabbit=True),
    rows.Row('conductor', 'migration_context_set',
             _context_set_after_failed, variant='after-failed', stale=True,
             rabbit=True),
    rows.Row('conductor', 'migration_context_drop', _context_drop,
             rabbit=True),
    rows.Row('conductor', 'migration_context_drop', _drop_after_apply,
             variant='after-apply', stale=True, rabbit=True),
    rows.Row('conductor', 'migration_context_apply', _context_apply),
    rows.Row('conductor', 'migration_context_apply', _apply_after_drop,
             variant='after-drop', stale=True),
    rows.Row('conductor', 'live_migrate_instance', _live_migrate),
    rows.read('conductor', 'live_migration_dry_run', _dry_run),
    rows.Row('conductor', 'migration_abort', _abort_waiting, rabbit=True),
    rows.Row('conductor', 'migration_abort', _abort_running,
             variant='running', rabbit=True),
    rows.Row('conductor', 'migration_resume', _resume, rabbit=True),
    rows.Row('conductor', 'migration_force_complete', _force_complete,
             changes=False),
    rows.read('conductor', 'migration_get_all', _migration_get_all),
    rows.Row('conductor', 'instance_create', _instance_create),
    rows.Row('conductor', 'instance_adopt', _instance_adopt),
    rows.read('conductor', 'compute_node_get_all',
              lambda world: _to('compute_node_get_all')),
    rows.Row('conductor', 'instance_delete', _instance_delete, rabbit=True),
    rows.Row('conductor', 'compute_node_delete', _node_delete),
    rows.Row('conductor', 'heal_claims', _heal),
    rows.read('conductor', 'host_domains',
              lambda world: _to('host_domains', host=world.guest().host)),
    rows.Row('conductor', 'host_refresh_usage',
             lambda world: _to('host_refresh_usage', host='host-a'),
             changes=False),
    rows.read('conductor', 'get_domain_xml', _guest_read('get_domain_xml')),
    rows.Row('conductor', 'host_set_disabled',
             lambda world: _to('host_set_disabled', host='host-b',
                               disabled=True, reason='firmware upgrade'),
             extra=_maintenance),
    # The test driver cannot resize: the first delivery records the
    # change (refused per guest, the guest's record restored), the
    # repeat is answered from that record.
    rows.Row('conductor', 'instance_memory_set', _memory_set,
             same_answer=True, rabbit=True),
    rows.Row('conductor', 'host_reclaim', _host_reclaim, same_answer=True),
    # A plan is read only; its answer is compared by its moves (the
    # placed objects' change lists may come in another order).
    rows.Row('conductor', 'host_drain_plan', _drain_plan, changes=False,
             extra=_planned),
    # Drains (API 1.10): the records hold the drain and its moves; a
    # repeat start answers with the drain recorded, a repeat abort finds
    # nothing left to cancel. Reads answer with the time elapsed, so
    # only the state is compared.
    rows.Row('conductor', 'host_drain_start', _drain_start,
             extra=_maintenance, rabbit=True),
    rows.Row('conductor', 'host_drain_show', _drain_show, changes=False),
    rows.Row('conductor', 'host_drain_wait', _drain_wait, changes=False),
    rows.Row('conductor', 'host_drain_abort', _drain_abort, rabbit=True),
    rows.Row('conductor', 'host_defragment_plan', _defragment_plan,
             changes=False),
    # A defragmentation carried out (API 1.13): a repeat start answers
    # with the one recorded and records nothing more.
    rows.Row('conductor', 'host_defragment_start', _defragment_start),
]
