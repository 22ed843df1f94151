"""numamig-conductor: the conductor daemon (database, scheduling, tasks).

Reads /etc/numamig/numamig.conf (or --config-file/--config-dir), checks
the configuration, waits for the database (``[database] max_retries``)
and refuses to run on a schema other than the newest ('numamig-manage db
sync' first), then serves the conductor RPC API. SIGTERM stops it
gracefully: in-flight requests finish first.

One process is one conductor worker. To run several, start several
processes with distinct ``host`` values; they share the RPC topic and
the database (not SQLite).
"""

import sys

from oslo_log import log as logging

from numamig import _backend
from numamig import rpc
from numamig import service
from numamig.conf import CONF
from numamig.db import api as db_api

LOG = logging.getLogger(__name__)


def main(argv=None):
    _backend.select_threading(strict=True)
    service.parse_args(CONF, sys.argv[1:] if argv is None else argv)
    if (CONF.conductor.workers or 1) > 1:
        LOG.warning("[conductor] workers = %s: this daemon runs one worker "
                    "per process; start one numamig-conductor process per "
                    "worker instead", CONF.conductor.workers)
    db = db_api.Database.from_config(CONF)
    db.wait_until_reachable(max_retries=CONF.database.max_retries)
    conductor = service.ConductorService.from_conf(CONF, db,
                                                   rpc.get_transport(CONF))
    try:
        return service.run(CONF, conductor)
    finally:
        db.dispose()
        rpc.cleanup()


if __name__ == '__main__':
    sys.exit(main())
