"""Options of the [compute] group: which host resources guests may use."""

from oslo_config import cfg

from numamig.conf import types as nm_types

compute_group = cfg.OptGroup(
    'compute', title='Compute host resources',
    help="What part of this host's CPUs, memory and huge pages numamig "
         "may give to guests, and how densely.")

opts = [
    cfg.Opt('cpu_dedicated_set', type=nm_types.CPUSet(),
            help="Host CPUs that pinned vCPUs (hw:cpu_policy=dedicated or "
                 "mixed) and isolated emulator threads may use, e.g. "
                 "'2-15,18-31'. Unset: every host CPU not in "
                 "cpu_shared_set. Naming a CPU the host lacks is an error "
                 "at start."),
    cfg.Opt('cpu_shared_set', type=nm_types.CPUSet(),
            help="Host CPUs that floating vCPUs and shared emulator threads "
                 "run on, e.g. '0-1,16-17'. Must not overlap "
                 "cpu_dedicated_set. Unset with cpu_dedicated_set set: no "
                 "shared CPUs; both unset: every CPU is dedicated."),
    cfg.IntOpt('reserved_host_memory_mb', default=512, min=0,
               help="Memory kept for the host itself, in MiB, taken from "
                    "NUMA cell 0's small-page memory."),
    cfg.MultiOpt('reserved_huge_pages', item_type=nm_types.ReservedHugePages(),
                 help="Huge pages no guest may take, one entry per pool, "
                      "e.g. 'node:0,size:2048,count:64' ('size' in KiB or "
                      "with a unit: 2M, 1G). Use it for pages the host's "
                      "own services (DPDK, OVS) allocate."),
    cfg.FloatOpt('cpu_allocation_ratio', default=16.0, min=0.0001,
                 help="How many floating vCPUs may share one pCPU of a "
                      "cell's shared set. Pinned vCPUs are never "
                      "overcommitted whatever this says."),
    cfg.FloatOpt('ram_allocation_ratio', default=1.0, min=0.0001,
                 help="Memory overcommit per NUMA cell for small-page "
                      "guests. Huge-page guests are never overcommitted. "
                      "Keep 1.0 for NUMA guests unless you accept swapping."),
    cfg.IntOpt('max_concurrent_live_migrations', default=4, min=1,
               help="Outgoing live migrations this host runs at once; "
                    "further ones wait, in order, in status 'queued'. "
                    "Each running migration takes a share of the host's "
                    "migration network and one agent thread, never an "
                    "RPC server thread. Keep it at or above the number of "
                    "migrations the conductor starts per source host, or "
                    "the surplus waits, and one still queued after twice "
                    "[DEFAULT] rpc_response_timeout_migration is failed by "
                    "the conductor (nothing moved; start it again)."),
    cfg.IntOpt('dirty_rate_sample_interval', default=300, min=0,
               max=86400,
               help="Seconds between this agent's samples of its guests' "
                    "dirty rates (libvirt's page sampling, every guest "
                    "at once, one 1 s window; guests migrating out are "
                    "left out). A drain of this host uses a guest's last "
                    "sample when it is younger than [conductor] "
                    "drain_estimate_max_age, and starts its moves at "
                    "once instead of after a fresh window "
                    "(doc/source/drain.rst). 0: never sample in the "
                    "background; every drain then samples first."),
    cfg.FloatOpt('device_detach_timeout', default=30.0, min=1.0, max=600.0,
                 help="Seconds a source waits, before a live migration, for "
                      "the guest to release each passed-through PCI device "
                      "it hot-unplugs (libvirt's device-removed event). A "
                      "guest OS without PCI hot-plug support never releases "
                      "one: the migration then fails at this deadline, the "
                      "devices already released are plugged back and the "
                      "guest keeps running here. Set a guest's flavor "
                      "extra spec numamig:device_migration=refuse (or image "
                      "property numamig_device_migration=refuse) to refuse "
                      "its migrations instead of unplugging."),
    cfg.BoolOpt('packing_host_numa_cells_allocation_strategy', default=False,
                help="Place guest cells on the fullest host cells first "
                     "(pack) instead of the emptiest (spread). Pack keeps "
                     "whole cells free for large guests; spread avoids "
                     "piling every guest onto cell 0."),
    cfg.IntOpt('update_resources_interval', min=1, default=None,
               help="Seconds between this agent's recomputes of its usage "
                    "from the conductor's records (instances here and "
                    "claims of migrations into here); unset: [DEFAULT] "
                    "report_interval. A recompute is what drops a claim "
                    "whose migration ended elsewhere; lower it to free "
                    "such resources sooner, at the cost of two conductor "
                    "calls per run."),
    cfg.FloatOpt('min_change_report_interval', default=1.0, min=0.0,
                 max=60.0,
                 help="Shortest time in seconds between two reports this "
                      "agent sends because its guests changed (a guest "
                      "arrived, left, or a claim was dropped); changes in "
                      "between go into the next report together. A change "
                      "after a quiet spell is reported at once. Each report "
                      "is a whole host topology the conductor stores and "
                      "schedules from: raise this on clouds that run many "
                      "migrations at once to spare the conductor's CPU; 0 "
                      "reports every burst of changes at once. Keep it well "
                      "below report_interval."),
    cfg.IntOpt('reconcile_interval', min=1, default=None,
               help="Seconds between this agent's looks for outgoing "
                    "migrations that no thread here drives any more (the "
                    "agent restarted mid-migration) and that it finishes "
                    "from what libvirt shows; unset: [DEFAULT] "
                    "report_interval. Lower it to end such migrations "
                    "sooner after a restart."),
    cfg.BoolOpt('cpu_power_management', default=False,
                help="Power down the dedicated pCPUs (cpu_dedicated_set) "
                     "that no guest and no move claim on this host uses, "
                     "and power them up before a guest needs them: a move "
                     "claim powers up the destination's pCPUs before the "
                     "source starts, a completed migration powers down the "
                     "source's, a rollback or abort powers the claim's "
                     "down again, and the agent's start powers up every "
                     "pCPU a recorded guest or claim holds. CPU 0 and "
                     "shared CPUs are never touched. Requires "
                     "cpu_dedicated_set. Each host's state shows in "
                     "'numamig-manage host show' and the "
                     "numamig_agent_cpus_powered_down metric. Leave off "
                     "on hosts whose dedicated CPUs also serve anything "
                     "numamig does not know about (DPDK, OVS)."),
    cfg.StrOpt('cpu_power_management_strategy', default='cpu_state',
               choices=[('cpu_state', "take unused dedicated pCPUs "
                                      "offline (sysfs cpuN/online = 0) and "
                                      "online again when needed: saves the "
                                      "most, costs a few ms per pCPU"),
                        ('governor', "switch unused dedicated pCPUs to "
                                     "cpu_power_governor_low and used ones "
                                     "to cpu_power_governor_high (sysfs "
                                     "cpufreq/scaling_governor); the pCPUs "
                                     "stay online. Needs a cpufreq driver: "
                                     "a pCPU without one is reported as "
                                     "failed and left as it is")],
               help="How cpu_power_management powers pCPUs down and up."),
    cfg.StrOpt('cpu_power_governor_low', default='powersave',
               help="The cpufreq governor of unused dedicated pCPUs with "
                    "the 'governor' strategy; it must be one the pCPU's "
                    "scaling_available_governors lists."),
    cfg.StrOpt('cpu_power_governor_high', default='performance',
               help="The cpufreq governor of dedicated pCPUs a guest or "
                    "claim uses with the 'governor' strategy."),
    cfg.StrOpt('cpu_power_sysfs_root', default='/sys/devices/system/cpu',
               help="Where the kernel's CPU directories (cpuN/online, "
                    "cpuN/cpufreq) are. Change it only to point the agent "
                    "at a copy of that tree (tests)."),
]


def register_opts(conf):
    conf.register_group(compute_group)
    conf.register_opts(opts, group=compute_group)


def list_opts():
    return {compute_group: opts}
