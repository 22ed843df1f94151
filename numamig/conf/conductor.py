"""Options of the [conductor] group."""

from oslo_config import cfg

conductor_group = cfg.OptGroup('conductor', title='Conductor service')

opts = [
    cfg.IntOpt('workers', min=1,
               help="Number of conductor worker processes. Unset: one per "
                    "CPU. Workers share the database (PostgreSQL or "
                    "MariaDB; with SQLite only one worker runs); raise it "
                    "when migrations queue behind each other."),
    cfg.IntOpt('stalled_migration_interval', default=60, min=1,
               help="Seconds between looks for migrations a dead "
                    "conductor worker left behind (accepted or queued for "
                    "longer than the destination choice can take). Such "
                    "migrations are ended and their claims released; "
                    "lower it to recover faster after a conductor "
                    "crash."),
]


def register_opts(conf):
    conf.register_group(conductor_group)
    conf.register_opts(opts, group=conductor_group)


def list_opts():
    return {conductor_group: opts}
