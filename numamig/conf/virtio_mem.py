"""Options of the [virtio_mem] group: memory changes of running guests."""

from oslo_config import cfg

virtio_mem_group = cfg.OptGroup(
    'virtio_mem', title='virtio-mem memory changes',
    help="How the conductor carries out 'numamig-manage instance memory "
         "set' and 'host reclaim' on guests with virtio-mem devices "
         "(flavor key hw:virtio_mem_size).")

opts = [
    cfg.IntOpt('resize_timeout', default=30, min=1, max=3600,
               help="Seconds a guest has to plug or unplug what a memory "
                    "change asks of it. A guest still short then (no "
                    "virtio_mem driver, a hung or busy guest) is reported "
                    "as such and keeps what it had: the host releases only "
                    "what the guest really unplugged. Measured with a "
                    "Debian guest under TCG: 1-5 s per change. Raise it "
                    "for large changes of busy guests."),
    cfg.IntOpt('max_loss_mb', default=1024, min=2,
               help="The most MiB one guest may lose in one memory change "
                    "(per request, summed over its devices). The guest "
                    "driver keeps no reserve for the guest: asking it to "
                    "unplug memory it uses can run it out of memory, so a "
                    "host reclaim spreads over several guests instead. "
                    "Lower it for guests that use most of their memory."),
    cfg.BoolOpt('placement_reclaim', default=False,
                help="When a live migration's destination (or a new "
                     "guest's host) refuses a guest only because one host "
                     "NUMA node lacks memory, reclaim that memory from the "
                     "virtio-mem devices of the guests on that node (down "
                     "to each device's floor, flavor key hw:virtio_mem_min, "
                     "by default what it started with), then ask the host "
                     "once more. Each guest has resize_timeout seconds to "
                     "give its part back and loses at most max_loss_mb; a "
                     "placement takes at most placement_reclaim_max_mb. If "
                     "the guests fall short or the host still refuses, "
                     "what they gave is given back and the host counts as "
                     "refusing. The migration record lists what was taken "
                     "from whom (numamig-manage migration show). Off by "
                     "default: it shrinks running guests; enable it where "
                     "flavors set hw:virtio_mem_min for memory their guests "
                     "can spare."),
    cfg.IntOpt('placement_reclaim_max_mb', default=2048, min=2,
               help="The most MiB one placement may reclaim, all guests "
                    "together (with placement_reclaim). A guest that needs "
                    "more on the node is refused by that host as without "
                    "reclaim. Raise it for large guests; lower it to keep "
                    "the wait of a placement short (measured under TCG: "
                    "192 MiB unplugged in about 2 s by an idle guest)."),
    cfg.IntOpt('placement_reclaim_max_hosts', default=8, min=1, max=1000,
               help="The most hosts a scheduled live migration or new "
                    "guest (instance create --auto) that no candidate took "
                    "asks about a reclaim (with "
                    "placement_reclaim). The scheduler's refused hosts "
                    "short only of memory on one node are ranked by the "
                    "memory they lack, and this many are fitted and have "
                    "their guests' slack read; each costs a database "
                    "read and a few dozen fits in the conductor (measured: "
                    "benchmarks/bench_placement_reclaim.py). Those that "
                    "can be freed are tried, least reclaimed first (a "
                    "migration within [conductor] migrate_max_retries). "
                    "Raise it in a cloud "
                    "where few hosts' guests have slack."),
]


def register_opts(conf):
    conf.register_group(virtio_mem_group)
    conf.register_opts(opts, group=virtio_mem_group)


def list_opts():
    return {virtio_mem_group: opts}
