"""numamig-conductor: the conductor daemon (database, scheduling, tasks).

Reads /etc/numamig/numamig.conf (or --config-file/--config-dir), checks
the configuration, waits for the database (``[database] max_retries``)
and refuses to run on a schema other than the newest ('numamig-manage db
sync' first), then serves the conductor RPC API. SIGTERM stops it
gracefully: from that moment it admits no migration and starts no drain
or defragmentation move, answers the operators' waits it holds, lets
in-flight requests and started migration tasks finish, and exits.

``[conductor] workers`` worker processes serve the same topic and share
the database (one per CPU when unset). SQLite allows a single writer
process, so with SQLite one worker runs in this process.
"""

import os
import sys

from oslo_log import log as logging

from numamig import _backend

LOG = logging.getLogger(__name__)


def worker_count(conf, db):
    """How many conductor workers to run for this configuration."""
    wanted = conf.conductor.workers or os.cpu_count() or 1
    if wanted > 1 and db.is_sqlite:
        if conf.conductor.workers:
            LOG.warning("[conductor] workers = %s, but the database is "
                        "SQLite, which allows one writer process: running "
                        "one worker", conf.conductor.workers)
        return 1
    return wanted


def main(argv=None):
    # First, before anything imports oslo_messaging (numamig._backend).
    _backend.for_daemon()
    from numamig.cmd import daemon
    return daemon.start('numamig-conductor', lambda: _main(argv))


def _main(argv):
    from numamig import rpc
    from numamig import service
    from numamig.cmd import daemon
    from numamig.conf import CONF
    from numamig.db import api as db_api
    service.parse_args(CONF, sys.argv[1:] if argv is None else argv,
                       description=__doc__)
    daemon.check_broker(CONF)
    db = db_api.Database.from_config(CONF)
    db.wait_until_reachable(max_retries=CONF.database.max_retries,
                            interval=CONF.database.retry_interval)
    workers = worker_count(CONF, db)
    if CONF.metrics.port:
        # The workers' RPC call histories start again with the daemon.
        from numamig import metrics
        metrics.SharedCallTimes.clear(service.conductor_calls_directory(CONF))
    if workers > 1:
        # Fail here, once, on an old schema; the workers connect anew.
        db.check_schema()
        db.dispose()
        # And here on a metrics port taken by another program: a worker
        # failing to listen would be restarted for ever.
        from numamig import metrics
        metrics.check_can_listen(CONF)
        LOG.info("Starting %d conductor workers", workers)
        return service.run(CONF, service.ConductorWorker(CONF), workers)
    conductor = service.ConductorService.from_conf(CONF, db,
                                                   rpc.get_transport(CONF))
    try:
        return service.run(CONF, conductor)
    finally:
        db.dispose()
        rpc.cleanup()


if __name__ == '__main__':
    sys.exit(main())
