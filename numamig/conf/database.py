"""Options of the [database] group (the conductor's SQL database)."""

from oslo_config import cfg

database_group = cfg.OptGroup(
    'database', title='Conductor database',
    help="Only the conductor opens the database; compute agents go "
         "through it over RPC.")

opts = [
    cfg.StrOpt('connection', secret=True,
               default='sqlite:///$state_path/numamig.sqlite',
               help="SQLAlchemy URL of the database, e.g. "
                    "'postgresql+psycopg2://numamig:PASS@db/numamig' or "
                    "'mysql+pymysql://numamig:PASS@db/numamig'. SQLite suits "
                    "a single conductor process only; it runs in "
                    "write-ahead-log mode, so back the file up with "
                    "'sqlite3 FILE .backup COPY' (a plain copy may miss "
                    "commits still in FILE-wal)."),
    cfg.IntOpt('max_retries', default=10, min=-1,
               help="Times to retry connecting to the database at start; "
                    "-1 retries forever."),
]


def register_opts(conf):
    conf.register_group(database_group)
    conf.register_opts(opts, group=database_group)


def list_opts():
    return {database_group: opts}
