"""Options of the [database] group: oslo.db's, with numamig's default.

numamig opens its database through oslo.db (numamig.db.api), so the
group is oslo.db's own options; numamig sets the default URL (a
SQLite file under ``state_path``) and adds one option of its own,
``idle_in_transaction_timeout``. Only the conductor opens the database;
compute agents go through it over RPC.
"""

from oslo_config import cfg
from oslo_db import options as db_options

DEFAULT_CONNECTION = 'sqlite:///$state_path/numamig.sqlite'

# On the option objects themselves, not as a ConfigOpts override: the
# sample generator and every ConfigOpts (tests' fixtures included) see it.
cfg.set_defaults(db_options.database_opts, connection=DEFAULT_CONNECTION)


numamig_opts = [
    cfg.IntOpt('idle_in_transaction_timeout', default=5, min=0, max=3600,
               help="PostgreSQL only: seconds a numamig session may stay "
                    "idle inside a transaction before the server ends it "
                    "(idle_in_transaction_session_timeout, set on every "
                    "connection). numamig's transactions never wait on "
                    "anything but the database, so a session idle inside "
                    "one belongs to a conductor that stopped or whose host "
                    "lost its network mid-transaction: until the server "
                    "ends it, its row locks stay held, and one of them is "
                    "the admission lock every conductor takes to admit or "
                    "record a migration, so no migration moves anywhere. "
                    "Without this, the server notices a host cut off only "
                    "when its TCP keepalives give up (2 hours with Linux "
                    "defaults). Keep it well below the conductors' lease "
                    "(three times [conductor] stalled_migration_interval, "
                    "capped at 15 s) so that they can take over; raise it "
                    "only if the database logs 'terminating connection due "
                    "to idle-in-transaction timeout' for conductors that "
                    "are alive (a host so loaded that a process stalls for "
                    "seconds). 0: never (the server's own setting holds). "
                    "MariaDB/MySQL: set the server's "
                    "idle_transaction_timeout (MariaDB 10.3+) instead "
                    "(doc/source/deployment.rst)."),
]


def register_opts(conf):
    conf.register_opts(db_options.database_opts, group='database')
    conf.register_opts(numamig_opts, group='database')


def list_opts():
    return {'database': db_options.database_opts + numamig_opts}
