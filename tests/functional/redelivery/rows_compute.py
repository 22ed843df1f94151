"""Redelivery rows of a compute agent's RPC methods (one or more each)."""

from numamig import objects
from numamig.conductor import records
from numamig.db import instances
from tests.functional.redelivery import rows
from tests.functional.redelivery.world import Delivery


def _to(host, method, **kwargs):
    return Delivery(host, method, kwargs)


def _recompute(world, host):
    """Settle by the host's next usage recompute (what bounds a claim
    nobody records)."""
    def settle():
        world.settle()
        world.dep.agent(host).tracker.update_available_resource(world.ctxt)
    return settle


def _check_dest(world):
    guest = world.guest()
    migration = world.admitted(guest)
    return _to('host-b', 'check_can_live_migrate_destination',
               **rows.dest_answer(world, guest, migration))


def _check_dest_old_way(world):
    guest = world.guest()
    migration = world.admitted(guest)
    return _to('host-b', 'check_can_live_migrate_destination',
               **rows.dest_answer(world, guest, migration,
                                  with_source=False))


def _check_dest_after_drop(world):
    guest = world.guest()
    migration = world.admitted(guest)
    kwargs = rows.dest_answer(world, guest, migration)
    answer = world.compute_api().check_can_live_migrate_destination(
        world.ctxt, kwargs['instance'], 'host-b', kwargs['migration'], None,
        source_data=kwargs['source_data'])
    world.compute_api().drop_move_claim_at_destination(
        world.ctxt, guest, kwargs['migration'])
    records.set_status(world.worker, migration.uuid, 'error',
                       error='no destination could be prepared')
    assert answer.migration_context is not None
    delivery = _to('host-b', 'check_can_live_migrate_destination', **kwargs)
    delivery.settle = _recompute(world, 'host-b')
    return delivery


def _at_claimed_destination(method, argument):
    """A message to the destination of a migration that holds its claim,
    with the ``migration`` or the ``migrate_data`` the source sends."""
    def setup(world):
        guest = world.guest()
        migration, migrate_data = world.claimed(guest)
        sent = {'migration': migration, 'migrate_data': migrate_data}
        return _to('host-b', method, instance=world.record(guest.uuid),
                   **{argument: sent[argument]})
    return setup


def _accept(world):
    guest = world.guest()
    migration, migrate_data = world.running(guest)
    return _to('host-b', 'accept_emulated_migration',
               instance=world.record(guest.uuid), migration=migration,
               dest_xml=world.dest_xml(guest, migrate_data))


def _accept_after_rollback(world):
    guest = world.guest()
    migration, migrate_data = world.running(guest)
    dest_xml = world.dest_xml(guest, migrate_data)
    world.compute_api().rollback_live_migration_at_destination(
        world.ctxt, guest, migration)
    return _to('host-b', 'accept_emulated_migration',
               instance=world.record(guest.uuid), migration=migration,
               dest_xml=dest_xml)


def _post(records_by_source):
    def setup(world):
        guest = world.guest()
        migration = world.arrived(guest)
        return _to('host-b', 'post_live_migration_at_destination',
                   instance=world.record(guest.uuid), migration=migration,
                   records_by_source=records_by_source)
    return setup


def _rollback(world):
    guest = world.guest()
    migration, migrate_data = world.running(guest)
    world.compute_api().accept_emulated_migration(
        world.ctxt, guest, migration, world.dest_xml(guest, migrate_data))
    return _to('host-b', 'rollback_live_migration_at_destination',
               instance=world.record(guest.uuid), migration=migration)


def _rollback_after_completed(world):
    guest = world.guest()
    migration = world.completed(guest)
    return _to('host-b', 'rollback_live_migration_at_destination',
               instance=guest, migration=migration)


def _drop_after_apply(world):
    guest = world.guest()
    migration = world.completed(guest)
    return _to('host-b', 'drop_move_claim_at_destination', instance=guest,
               migration=migration)


def _check_source(world):
    guest = world.guest()
    migration = world.admitted(guest)
    request = objects.LiveMigrateData(
        instance_uuid=guest.uuid, source_host=guest.host,
        dest_host='host-b', migration_uuid=migration.uuid,
        dst_supports_numa_live_migration=True)
    return _to('host-a', 'check_can_live_migrate_source', instance=guest,
               dest_check_data=request)


def _live_migration(world):
    guest = world.guest()
    migration, migrate_data = world.claimed(guest)
    delivery = _to('host-a', 'live_migration',
                   instance=world.record(guest.uuid), migration=migration,
                   migrate_data=migrate_data)
    delivery.cast = True

    def settle():
        # Driven by the delivery: settling waits for its end.
        world.parked.discard(migration.uuid)
        world.settle()
    delivery.settle = settle
    return delivery


def _abort(method):
    def setup(world):
        guest = world.guest()
        migration = world.blocked(guest)
        return _to('host-a', method, instance=world.record(guest.uuid),
                   migration=migration)
    return setup


def _resumed(method, host):
    """A migration the conductor moved postcopy-paused -> running for
    a resume; the embedded hosts have no paused guest, so each delivery
    is refused the same way and nothing changes."""
    def setup(world):
        guest = world.guest()
        migration, _data = world.running(guest)
        for status in ('postcopy-paused', 'running'):
            migration = records.set_status(world.worker, migration.uuid,
                                           status)
        return _to(host, method, instance=world.record(guest.uuid),
                   migration=migration)
    return setup


def _build(world):
    record = instances.create(world.dep.db, rows.new_instance())
    return _to('host-a', 'build_instance', instance=record.instance,
               limits=None)


def _build_after_delete(world):
    guest = world.guest()
    world.api.instance_delete(world.ctxt, guest.uuid)
    return _to('host-a', 'build_instance', instance=guest, limits=None)


def _adopt(world):
    rows.unrecorded_guest(world)
    return _to('host-a', 'adopt_guests')


def _delete(world):
    guest = world.guest()
    return _to('host-a', 'delete_instance', instance=world.record(guest.uuid))


ROWS = [
    rows.Row('compute', 'check_can_live_migrate_destination', _check_dest,
             same_answer=True),
    rows.Row('compute', 'check_can_live_migrate_destination',
             _check_dest_old_way, variant='asks-the-source'),
    rows.Row('compute', 'check_can_live_migrate_destination',
             _check_dest_after_drop, variant='after-drop', stale=True),
    rows.read('compute', 'pre_live_migration',
              _at_claimed_destination('pre_live_migration', 'migrate_data')),
    rows.Row('compute', 'accept_emulated_migration', _accept),
    rows.Row('compute', 'accept_emulated_migration', _accept_after_rollback,
             variant='after-rollback', stale=True),
    rows.Row('compute', 'post_live_migration_at_destination', _post(True),
             rabbit=True),
    rows.Row('compute', 'post_live_migration_at_destination', _post(False),
             variant='records-it', rabbit=True),
    rows.Row('compute', 'rollback_live_migration_at_destination',
             _rollback),
    rows.Row('compute', 'rollback_live_migration_at_destination',
             _rollback_after_completed, variant='after-completed',
             stale=True),
    rows.Row('compute', 'drop_move_claim_at_destination',
             _at_claimed_destination('drop_move_claim_at_destination',
                                     'migration'), rabbit=True),
    rows.Row('compute', 'drop_move_claim_at_destination', _drop_after_apply,
             variant='after-apply', stale=True, rabbit=True),
    rows.read('compute', 'check_can_live_migrate_source', _check_source),
    rows.Row('compute', 'live_migration', _live_migration),
    rows.Row('compute', 'live_migration_abort',
             _abort('live_migration_abort'), same_answer=True),
    rows.Row('compute', 'live_migration_force_complete',
             _abort('live_migration_force_complete'), changes=False),
    rows.Row('compute', 'resume_postcopy',
             _resumed('resume_postcopy', 'host-a'), changes=False,
             same_answer=True, rabbit=True),
    rows.read('compute', 'postcopy_resume_target',
              _resumed('postcopy_resume_target', 'host-b')),
    rows.Row('compute', 'build_instance', _build, rabbit=True),
    rows.Row('compute', 'build_instance', _build_after_delete,
             variant='after-delete', stale=True, rabbit=True),
    rows.Row('compute', 'adopt_guests', _adopt, same_answer=True),
    rows.read('compute', 'get_domain_xml',
              lambda world: _to('host-a', 'get_domain_xml',
                                instance_uuid=world.guest().uuid)),
    rows.read('compute', 'list_domains',
              lambda world: (world.guest(), _to('host-a', 'list_domains'))[1]),
    rows.read('compute', 'predict_convergence',
              lambda world: _to('host-a', 'predict_convergence',
                                instance=world.guest())),
    rows.read('compute', 'sample_dirty_rates',
              lambda world: _to('host-a', 'sample_dirty_rates',
                                instance_uuids=[world.guest().uuid],
                                max_age=600)),
    rows.Row('compute', 'refresh_usage',
             lambda world: _to('host-a', 'refresh_usage'), changes=False),
    rows.Row('compute', 'delete_instance', _delete, rabbit=True),
    # Absolute sizes; the test driver refuses both deliveries alike.
    rows.Row('compute', 'resize_virtio_mem',
             lambda world: _to('host-a', 'resize_virtio_mem',
                               instance_uuid=world.vmem_guest().uuid,
                               requested={'1': 128}, deadline_s=1),
             changes=False, same_answer=True, rabbit=True),
]
