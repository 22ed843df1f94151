"""Options of the [upgrade_levels] group: RPC version caps during upgrades."""

from oslo_config import cfg

upgrade_group = cfg.OptGroup(
    'upgrade_levels', title='RPC version caps',
    help="During a rolling upgrade, cap the RPC versions new services send "
         "so that not-yet-upgraded ones understand them. Remove the caps "
         "once every service runs the new release.")

opts = [
    cfg.StrOpt('compute',
               help="Highest compute RPC API version to send: a version "
                    "('1.0' release 1, '1.1' release 2) or a release "
                    "('release-1', 'release-2'). Unset: what each host's "
                    "reported service version serves. A cap below release "
                    "2 silently selects the old path; numamig-status "
                    "upgrade check warns about it."),
    cfg.StrOpt('conductor',
               help="Highest conductor RPC API version to send, for the "
                    "agents' records API and the operators' operations "
                    "API alike: a version ('1.0' or '1.1': release 1's "
                    "one API; '2.0': release 2's APIs) or a release "
                    "('release-1', 'release-2'). Unset: what the "
                    "conductor's service version (its ping answer) "
                    "serves."),
]


def register_opts(conf):
    conf.register_group(upgrade_group)
    conf.register_opts(opts, group=upgrade_group)


def list_opts():
    return {upgrade_group: opts}
