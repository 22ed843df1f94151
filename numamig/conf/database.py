"""Options of the [database] group: oslo.db's, with numamig's default.

numamig opens its database through oslo.db (numamig.db.api), so the
group is oslo.db's own options; numamig only sets the default URL (a
SQLite file under ``state_path``). Only the conductor opens the
database; compute agents go through it over RPC.
"""

from oslo_config import cfg
from oslo_db import options as db_options

DEFAULT_CONNECTION = 'sqlite:///$state_path/numamig.sqlite'

# On the option objects themselves, not as a ConfigOpts override: the
# sample generator and every ConfigOpts (tests' fixtures included) see it.
cfg.set_defaults(db_options.database_opts, connection=DEFAULT_CONNECTION)


def register_opts(conf):
    conf.register_opts(db_options.database_opts, group='database')


def list_opts():
    return {'database': db_options.database_opts}
