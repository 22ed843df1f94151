"""Options of the [locality] group: the locality watch of floating guests."""

from oslo_config import cfg

locality_group = cfg.OptGroup(
    'locality', title='Locality watch',
    help="A compute agent's watch over guests without strict NUMA "
         "binding (shared vCPUs, preferred or interleave memory, no NUMA "
         "topology): where their memory is, where their vCPUs run, and "
         "whether to move the memory to the vCPUs. Pinned and strictly "
         "bound guests are never touched. See the operator guide's "
         "'Locality watch' section.")

POLICIES = ('off', 'report', 'act')

opts = [
    cfg.StrOpt('policy', default='report', choices=[
        ('off', "Measure nothing; host and instance show say the watch "
                "is off."),
        ('report', "Measure every interval; show each guest's memory "
                   "per node and remote share, and say which guests "
                   "would be moved, but move nothing."),
        ('act', "Measure, and move the memory of a guest whose remote "
                "share stayed above remote_share_threshold for "
                "intervals_above looks toward its vCPUs' node (live "
                "numatune and vCPU pinning), within pages_per_interval "
                "and moves_per_guest.")],
               help="What this host's locality watch does. Start with "
                    "'report' and read 'numamig-manage host show' and the "
                    "numamig_agent_guest_remote_memory_share metric: "
                    "switch to 'act' where floating guests keep a large "
                    "remote share. Moving memory costs CPU and memory "
                    "bandwidth while it runs."),
    cfg.IntOpt('interval', default=60, min=5, max=3600,
               help="Seconds between two looks. A look reads each "
                    "running guest's /proc/PID/numa_maps (a few hundred "
                    "lines) and asks libvirt where its vCPUs run. Lower "
                    "it to react sooner; the watch needs intervals_above "
                    "looks before it moves anything."),
    cfg.FloatOpt('remote_share_threshold', default=0.5, min=0.0,
                 max=0.99,
                 help="A guest counts as remote when more than this share "
                      "(0-0.99) of its memory is on nodes other than the "
                      "one most of its vCPUs ran on. Lower it to keep "
                      "guests more local at the cost of more moves."),
    cfg.IntOpt('intervals_above', default=3, min=1, max=100,
               help="Consecutive looks a guest must stay above the "
                    "threshold before its memory is moved (hysteresis): "
                    "a guest whose vCPUs wander for a moment is not "
                    "chased. Raise it if guests are moved back and forth."),
    cfg.IntOpt('pages_per_interval', default=262144, min=1,
               help="The most 4 KiB pages the watch moves per look on "
                    "this host, all guests together (262144: 1 GiB). A "
                    "guest whose remote memory does not fit what is left "
                    "waits for the next look; one whose remote memory "
                    "exceeds the whole budget is never moved and is "
                    "shown as over-budget: raise this to move it."),
    cfg.IntOpt('moves_per_guest', default=2, min=1, max=100,
               help="The most moves of one guest within flap_window "
                    "looks. A guest that needs more keeps moving away "
                    "from its memory (its vCPUs wander across nodes): it "
                    "is left alone, shown as flapping, until the window "
                    "has passed. Pin such a guest, or raise "
                    "intervals_above."),
    cfg.IntOpt('flap_window', default=30, min=1, max=10000,
               help="Looks over which moves_per_guest counts a guest's "
                    "moves."),
    cfg.StrOpt('proc_root', default='/proc',
               help="Where the watch reads QEMU processes from. Change it "
                    "only for an agent whose QEMUs run in another PID "
                    "namespace mounted elsewhere, or in tests."),
]


def register_opts(conf):
    conf.register_group(locality_group)
    conf.register_opts(opts, group=locality_group)


def list_opts():
    return {locality_group: opts}
