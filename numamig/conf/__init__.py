"""numamig's configuration: the global CONF with every group registered.

numamig keeps oslo.config's global CONF (a private ConfigOpts breaks
oslo.messaging 18.3.1); services and tools parse it once at start.
"""

from oslo_config import cfg

from numamig.conf import opts

CONF = cfg.CONF
opts.register_all(CONF)
