"""What a redelivery row is, and the states several rows start from.

A row names one RPC method (``<api>.<method>``, with ``/<variant>`` when
a method has more than one), builds the state it acts on in a World and
returns the message to deliver:

* a *repeat* row delivers it twice; the snapshot after the second
  delivery must equal the one after the first (and, with ``changes``,
  the first must have changed something, so the row can fail);
* a *stale* row builds the state a later message left (the migration
  completed, the claim applied, a newer report stored) and delivers the
  earlier message: nothing may change.
"""

from oslo_utils import uuidutils

from numamig import objects
from numamig.db import instances
from numamig.db import migrations


class Row:
    """One method's redelivery case.

    :param setup: callable(World) -> world.Delivery.
    :param stale: deliver once, after the state a later message left.
    :param changes: the first delivery must change the snapshot.
    :param same_answer: both deliveries must get the same answer (reads,
        and methods whose effect lives in the caller's use of it).
    :param extra: callable(World) -> more to compare (what a snapshot
        leaves out, such as stored reports).
    :param rabbit: run over RabbitMQ too.
    """

    def __init__(self, api, method, setup, variant=None, stale=False,
                 changes=True, same_answer=False, extra=None,
                 rabbit=False):
        self.api = api
        self.method = method
        self.setup = setup
        self.variant = variant
        self.stale = stale
        self.changes = changes and not stale
        self.same_answer = same_answer
        self.extra = extra
        self.rabbit = rabbit

    @property
    def name(self):
        return f"{self.api}.{self.method}" + \
            (f"/{self.variant}" if self.variant else '')


def read(api, method, setup, **kwargs):
    """A row of a method that only reads: same answer, nothing changed."""
    return Row(api, method, setup, changes=False, same_answer=True,
               **kwargs)


def new_instance():
    """An instance not recorded yet: two pinned vCPUs, 1 GiB."""
    uuid = uuidutils.generate_uuid()
    return objects.Instance(
        uuid=uuid, name=f'guest-{uuid[:8]}', project_id='demo', vcpus=2,
        memory_mb=1024, extra_specs={'hw:cpu_policy': 'dedicated'})


def unplaced(world, guest):
    """``guest``'s record as a build leaves it before placement."""
    record = instances.update(world.dep.db, guest.uuid,
                              {'host': None, 'numa_topology': None})
    return record.instance


def leaked(world, guest):
    """A claim left by a migration that failed without dropping it."""
    migration, _ = world.claimed(guest)
    migrations.set_status(world.dep.db, migration.uuid, 'failed',
                          error='ended without its claim released')
    return migration


def unrecorded_guest(world):
    """A NUMA guest host-a runs that numamig does not know."""
    guest = world.guest('host-a')
    instances.destroy(world.dep.db, guest.uuid)
    world.dep.agent('host-a').tracker.drop_instance(guest.uuid)
    return guest


def dest_answer(world, guest, migration, with_source=True):
    """What the destination is asked, as the conductor asks it.

    :returns: the check's kwargs (API 1.3 with the source's answer, the
        way before without).
    """
    migration = migrations.set_dest_host(world.dep.db, migration.uuid,
                                         'host-b')
    kwargs = {'instance': world.record(guest.uuid),
              'source_host': guest.host, 'migration_uuid': migration.uuid,
              'migration': migration, 'limits': None}
    if with_source:
        request = objects.LiveMigrateData(
            instance_uuid=guest.uuid, source_host=guest.host,
            dest_host='host-b', migration_uuid=migration.uuid,
            dst_supports_numa_live_migration=True)
        kwargs['source_data'] = world.compute_api(
        ).check_can_live_migrate_source(world.ctxt, guest, request)
    return kwargs
