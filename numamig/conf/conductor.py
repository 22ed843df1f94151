"""Options of the [conductor] group."""

from oslo_config import cfg

conductor_group = cfg.OptGroup('conductor', title='Conductor service')

opts = [
    cfg.IntOpt('workers', min=1,
               help="Number of conductor worker processes. Unset: one per "
                    "CPU. Workers share the database; raise it when "
                    "migrations queue behind each other."),
]


def register_opts(conf):
    conf.register_group(conductor_group)
    conf.register_opts(opts, group=conductor_group)


def list_opts():
    return {conductor_group: opts}
