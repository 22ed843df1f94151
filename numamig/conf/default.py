"""Options of the [DEFAULT] group: identity and service timing."""

import socket

from oslo_config import cfg

opts = [
    cfg.StrOpt('host', default=socket.gethostname(), sample_default='<host>',
               help="Name of this node. Compute agents listen on an RPC "
                    "topic named after it and the conductor records "
                    "instances under it, so it must be unique in the "
                    "deployment and stable across restarts: changing it "
                    "orphans the host's instances."),
    cfg.IntOpt('migrate_max_retries', default=3, min=-1,
               help="How many further destination candidates the conductor "
                    "tries when a destination refuses a live migration "
                    "(its move claim does not fit, or it does not answer). "
                    "-1 tries every candidate; 0 tries only the first. "
                    "Raise it on clouds where hosts fill up between "
                    "scheduling and claiming."),
    cfg.IntOpt('report_interval', default=10, min=1,
               help="Seconds between a compute agent's topology reports to "
                    "the conductor. Lower values make the scheduler's view "
                    "fresher at the cost of RPC traffic; keep it well below "
                    "service_down_time."),
    cfg.IntOpt('service_down_time', default=60, min=1,
               help="Seconds after its last report that a compute agent is "
                    "considered down. Migrations to or from a down host are "
                    "refused. Must exceed report_interval."),
    cfg.StrOpt('state_path', default='/var/lib/numamig',
               help="Directory where numamig keeps local state (the "
                    "default SQLite database among it)."),
    cfg.IntOpt('rpc_response_timeout_migration', default=60, min=1,
               help="Seconds a conductor waits for a destination's answer "
                    "to a live-migration check before trying the next "
                    "candidate. It asks four times, each waiting a "
                    "quarter of this, so that an answer lost with a "
                    "broker restart costs a quarter (the source's check "
                    "too), or less: rpc_call_silence_timeout."),
    cfg.IntOpt('rpc_call_silence_timeout', default=6, min=0, max=120,
               help="Seconds a daemon's RPC call waits for a sign of life "
                    "from the service it asked before it takes the request "
                    "or its answer for lost (with a broker restart, which "
                    "deletes queues, or a worker that died) and sends it "
                    "again within the call's own timeout. The service "
                    "sends a heartbeat every half of this while it works, "
                    "so a slow answer is waited for; each further silence "
                    "waits twice as long. Every request numamig serves may "
                    "be sent again. A lost request then costs this, not a "
                    "share of rpc_response_timeout or "
                    "rpc_response_timeout_migration. 0 turns it off. Raise "
                    "it where the broker is slow to deliver (a heartbeat "
                    "must arrive within it); values below 2 are taken as "
                    "0, as a heartbeat is sent at most every second."),
    cfg.IntOpt('cli_broker_retries', default=2, min=0,
               help="Times numamig-manage tries the message broker again "
                    "(transport_url), a few seconds apart, before it gives "
                    "up with exit code 255 naming the broker. The daemons "
                    "always retry: they must outlive a broker restart."),
    cfg.FloatOpt('cli_conductor_timeout', default=5.0, min=0.5, max=60,
                 help="Seconds numamig-manage waits for a conductor to "
                      "answer a ping before an action that asks the "
                      "conductor: with none answering, the action is not "
                      "sent and the command ends at once with exit code "
                      "255, in one line naming the conductor's topic and "
                      "the broker, instead of waiting for the action's "
                      "whole timeout (60 s and more)."),
    cfg.BoolOpt('cli_direct_rpc', default=True,
                help="Whether numamig-manage 'migration start' sends its "
                     "request with numamig's own small AMQP client (py-amqp "
                     "alone, the same message) instead of loading "
                     "oslo.messaging, which costs most of the command's "
                     "time. It is used only where it reaches the conductor "
                     "exactly as oslo.messaging would (a rabbit:// URL with "
                     "one host, no [oslo_messaging_rabbit] option set, no "
                     "[upgrade_levels] conductor cap); otherwise, and with "
                     "false, the command goes through oslo.messaging. Set "
                     "false to rule the small client out when a start "
                     "misbehaves."),
    cfg.ListOpt('foreign_numa_specs', default=[],
                help="Flavor keys of the hw: namespace, and image "
                     "properties of the matching names (such as "
                     "hw_mem_page_size), that numamig accepts on a new "
                     "guest without reading them: another service's keys, "
                     "such as hw:watchdog_action. Any other key there that "
                     "numamig does not read is refused when the guest is "
                     "created, naming the closest key it knows: a typo such "
                     "as hw:cpu_polcy would otherwise leave the guest "
                     "unpinned. Keys outside those namespaces always pass. "
                     "Read by numamig-conductor (instance create) and "
                     "'numamig-manage numa fit'."),
]


def register_opts(conf):
    conf.register_opts(opts)


def list_opts():
    return {'DEFAULT': opts}
