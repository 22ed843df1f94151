"""Options of the [workarounds] group: escape hatches with known costs."""

from oslo_config import cfg

workarounds_group = cfg.OptGroup(
    'workarounds', title='Workarounds',
    help="Each option here restores old behaviour with a known risk. "
         "Enable one only for the reason its help gives, and remove it "
         "when that reason is gone.")

opts = [
    cfg.BoolOpt('enable_numa_live_migration', default=False,
                help="Allow live migration of guests with a NUMA topology "
                     "while some compute hosts are older than NUMA-aware "
                     "live migration. Such migrations copy the source's "
                     "XML: pins may overlap other guests and huge pages "
                     "may be missing on the destination. When to enable: "
                     "only during a rolling upgrade, for guests you can "
                     "check by hand afterwards."),
]


def register_opts(conf):
    conf.register_group(workarounds_group)
    conf.register_opts(opts, group=workarounds_group)


def list_opts():
    return {workarounds_group: opts}
