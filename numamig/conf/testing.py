"""Options of the [testing] group: aids for testing mixed-version clouds."""

from oslo_config import cfg

testing_group = cfg.OptGroup(
    'testing', title='Testing aids',
    help="Options that make a service behave unlike a production one, to "
         "test situations such as a rolling upgrade. Never set them on a "
         "production node; numamig-status upgrade check warns when they "
         "are.")

# The newest service version (numamig.objects.service.SERVICE_VERSION);
# conf/ sits below objects/, so a unit test keeps the two equal.
NEWEST_SERVICE_VERSION = 2

opts = [
    cfg.IntOpt('pretend_service_version', min=1,
               max=NEWEST_SERVICE_VERSION, advanced=True,
               help="TESTING AID. Run this compute agent or conductor as "
                    "the release of this service version instead of the "
                    "current one: 1 is the release before NUMA-aware live "
                    "migration (compute RPC API 1.0 only, LiveMigrateData "
                    "1.0 sent and accepted, no destination claim, the "
                    "source's domain XML copied verbatim, no claim drop). "
                    "Unset: the current release. Use it only to test a "
                    "rolling upgrade; see doc/source/upgrades.rst."),
]


def register_opts(conf):
    conf.register_group(testing_group)
    conf.register_opts(opts, group=testing_group)


def list_opts():
    return {testing_group: opts}
