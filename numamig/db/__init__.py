"""The conductor's SQL persistence: only the conductor imports this.

Usage::

    from numamig.db import api, instances, migrations, compute_nodes

    db = api.Database.from_config(CONF)   # or api.Database(url)
    db.sync()                              # numamig-manage db sync
    db.wait_until_reachable(CONF.database.max_retries,   # services, at
                            CONF.database.retry_interval)  # start
    db.check_schema()                      # services, at start
    record = instances.get(db, uuid)       # InstanceRecord(instance, rev)
    instances.update(db, uuid, {'task_state': None}, record.revision)
    migrations.set_status(db, mig_uuid, 'queued', detail='dest chosen')

Repository functions take and return numamig versioned objects
(Instance, Migration, MigrationContext, ComputeNodeReport); each is one
committed transaction. Lost races raise ConcurrentUpdate,
MigrationContextConflict or InvalidStatusTransition (numamig.exception),
never overwrite. Modules: ``api`` (oslo.db's enginefacade, SQLite
settings, schema state),
``schema`` (alembic, programmatic), ``models`` (tables), ``primitives``
(objects <-> stored JSON), ``instances``, ``migrations``,
``compute_nodes``; ``direct``: the few reads numamig-manage makes
through the DB-API driver alone, without SQLAlchemy or the objects.
"""
