"""numamig-compute: the compute agent daemon of one host.

Reads /etc/numamig/numamig.conf (or --config-file/--config-dir), checks
the configuration, connects to the hypervisor named by ``[libvirt]``,
reconciles its records, then serves the compute RPC API and reports the
host to the conductor every ``report_interval`` seconds. SIGTERM stops
it gracefully: in-flight requests finish first.
"""

import sys

from oslo_log import log as logging

from numamig import _backend

LOG = logging.getLogger(__name__)


def main(argv=None):
    # First, before anything imports oslo_messaging (numamig._backend).
    _backend.for_daemon()
    from numamig.cmd import daemon
    return daemon.start('numamig-compute', lambda: _main(argv))


def _main(argv):
    from numamig import rpc
    from numamig import service
    from numamig.cmd import daemon
    from numamig.conf import CONF
    from numamig.virt.libvirt import driver as lv_driver
    from numamig.virt.libvirt import settings as lv_settings
    service.parse_args(CONF, sys.argv[1:] if argv is None else argv,
                       description=__doc__)
    daemon.check_broker(CONF)
    driver = lv_driver.LibvirtDriver(lv_settings.LibvirtSettings.from_conf(
        CONF))
    agent = service.ComputeService.from_conf(CONF, driver,
                                             rpc.get_transport(CONF))
    try:
        return service.run(CONF, agent)
    finally:
        driver.cleanup_host()
        rpc.cleanup()


if __name__ == '__main__':
    sys.exit(main())
