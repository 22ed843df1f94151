"""Options of the [scheduler] group: choosing live-migration destinations."""

from oslo_config import cfg

scheduler_group = cfg.OptGroup(
    'scheduler', title='Destination scheduling',
    help="How the conductor picks destinations from hosts' reports.")

opts = [
    cfg.IntOpt('reservation_timeout', default=300, min=1,
               help="Seconds an in-flight placement stays reserved in the "
                    "scheduler's host cache when no report confirms it "
                    "(its fingerprint never matches). Lower it if a lost "
                    "migration keeps a host looking full."),
    cfg.IntOpt('max_candidates', default=10, min=1,
               help="How many hosts the scheduler returns as destination "
                    "candidates for one migration."),
]


def register_opts(conf):
    conf.register_group(scheduler_group)
    conf.register_opts(opts, group=scheduler_group)


def list_opts():
    return {scheduler_group: opts}
