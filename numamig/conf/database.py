"""Options of the [database] group: oslo.db's, with numamig's default.

numamig opens its database through oslo.db (numamig.db.api), so the
group is oslo.db's own options; numamig sets the default URL (a
SQLite file under ``state_path``) and adds options of its own: the
server-side ``idle_in_transaction_timeout`` and libpq's client-side
bounds on a silent server (``keepalives_*``, ``tcp_user_timeout``).
Only the conductor and numamig-manage open the database; compute agents
go through it over RPC.
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


_SILENT = ("A server that went silent (its host lost power or its "
           "network, a failover that moved its address) resets nothing: "
           "without these a client waits on it for the kernel's own "
           "limits, 15 minutes with data unacknowledged and 2 hours "
           "idle. ")

bound_opts = [
    cfg.IntOpt('keepalives_idle', default=10, min=0, max=7200,
               help="PostgreSQL only: seconds a connection may be idle "
                    "before the client's TCP keepalive probes start "
                    "(libpq's keepalives_idle). " + _SILENT + "With the "
                    "defaults (10 s, then 3 probes 5 s apart) a "
                    "conductor gives up on a silent primary within about "
                    "25-30 s and reconnects (to the new "
                    "primary with a multi-host URL and "
                    "target_session_attrs=read-write, "
                    "doc/source/control-plane.rst). 0: no keepalives "
                    "(the kernel's). A keepalive parameter in the URL's "
                    "query wins over these options. MariaDB/MySQL and "
                    "SQLite ignore them."),
    cfg.IntOpt('keepalives_interval', default=5, min=1, max=600,
               help="PostgreSQL only: seconds between two keepalive "
                    "probes the server leaves unanswered (libpq's "
                    "keepalives_interval); see keepalives_idle."),
    cfg.IntOpt('keepalives_count', default=3, min=1, max=100,
               help="PostgreSQL only: unanswered keepalive probes after "
                    "which the client drops the connection (libpq's "
                    "keepalives_count); see keepalives_idle."),
    cfg.IntOpt('tcp_user_timeout', default=30000, min=0, max=3600000,
               help="PostgreSQL only: milliseconds data sent to the "
                    "server may stay unacknowledged before the client "
                    "drops the connection (libpq's tcp_user_timeout, "
                    "Linux). " + _SILENT + "It bounds a statement sent "
                    "to a silent primary, as keepalives_idle bounds a "
                    "wait for its answer. Keep it above a busy server's "
                    "worst stall; 0: the kernel's (about 15 minutes). "
                    "MariaDB/MySQL and SQLite ignore it."),
]


def register_opts(conf):
    conf.register_opts(db_options.database_opts, group='database')
    conf.register_opts(numamig_opts + bound_opts, group='database')


def list_opts():
    return {'database': db_options.database_opts + numamig_opts +
            bound_opts}
