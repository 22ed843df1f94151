"""Options of the [metrics] group: the daemons' Prometheus endpoint."""

from oslo_config import cfg

metrics_group = cfg.OptGroup(
    'metrics', title='Prometheus metrics',
    help="Each daemon can serve its metrics over HTTP at /metrics, in "
         "Prometheus' text format, for a Prometheus server to scrape "
         "(doc/source/monitoring.rst lists them). Off by default.")

opts = [
    cfg.PortOpt('port', default=0, min=0,
                help="TCP port of this daemon's metrics endpoint; 0 (the "
                     "default) serves none. Give the conductor and the "
                     "compute agent of one host different ports (for "
                     "example 9480 and 9481). The workers of a conductor "
                     "share the port: any of them answers a scrape, and "
                     "every one reads the same records."),
    cfg.HostAddressOpt('host', default='127.0.0.1',
                       help="Address the metrics endpoint listens on. The "
                            "default serves this host only; set the "
                            "address of the network your Prometheus "
                            "server scrapes from (or 0.0.0.0) to reach it "
                            "from another host. The endpoint has no "
                            "authentication: it shows host names, guest "
                            "uuids and placement counts, never secrets."),
]


def register_opts(conf):
    conf.register_group(metrics_group)
    conf.register_opts(opts, group=metrics_group)


def list_opts():
    return {metrics_group: opts}
