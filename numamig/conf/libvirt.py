"""Options of the [libvirt] group: the hypervisor connection and migration."""

from oslo_config import cfg

libvirt_group = cfg.OptGroup(
    'libvirt', title='libvirt driver',
    help="How numamig reaches libvirt on this host and how it live "
         "migrates guests.")

connection_opts = [
    cfg.StrOpt('connection_uri', default='qemu:///system',
               help="libvirt URI of this host's hypervisor. Use "
                    "'test:///default' (or a test:///path file) for the "
                    "embedded tier, where numamig emulates migration; "
                    "'test+unix:///default?socket=PATH' for the test "
                    "driver of a libvirtd of its own, whose guests "
                    "outlive the agent's process."),
    cfg.StrOpt('virt_type', default='kvm',
               choices=[('kvm', 'hardware virtualisation (/dev/kvm)'),
                        ('qemu', 'software emulation (TCG), slow')],
               help="Domain type of guests numamig creates: 'kvm' on "
                    "hardware with virtualisation extensions, 'qemu' (TCG) "
                    "for nested or test hosts."),
    cfg.IntOpt('realtime_scheduler_priority', default=1, min=1, max=99,
               help="SCHED_FIFO priority of the realtime vCPUs of guests "
                    "with hw:cpu_realtime. Raise it only if host threads "
                    "at priority 1 starve those vCPUs."),
    cfg.IntOpt('emulated_migration_bandwidth', default=0, min=0,
               help="Embedded tier only (test driver hosts): MiB/s of the "
                    "modelled pre-copy run before an emulated migration, "
                    "so that its statistics (passes, remaining bytes, dirty "
                    "rate) and the convergence policies can be exercised. "
                    "0: no model, an emulated migration copies nothing "
                    "and reports no passes (the behaviour before)."),
    cfg.IntOpt('emulated_migration_dirty_rate', default=0, min=0,
               help="Embedded tier only: MiB/s its guests dirty during a "
                    "modelled pre-copy (see emulated_migration_bandwidth)."),
    cfg.IntOpt('emulated_migration_working_set', default=0, min=0,
               help="Embedded tier only: MiB its guests keep dirtying (the "
                    "most one pass can leave to resend); 0: all their "
                    "memory."),
    cfg.StrOpt('capabilities_file',
               help="Path of a libvirt capabilities XML file describing "
                    "this host's NUMA topology. Only for the embedded tier: "
                    "the test driver cannot describe NUMA hosts. Leave "
                    "unset on real hosts."),
]

migration_opts = [
    cfg.StrOpt('live_migration_scheme', default='tcp',
               help="URI scheme the source's libvirtd uses to reach the "
                    "destination's (qemu+SCHEME://host/system)."),
    cfg.StrOpt('live_migration_inbound_addr',
               help="Address other hosts reach this host on for migration "
                    "traffic. Unset: the host option's value."),
    cfg.PortOpt('live_migration_libvirtd_port',
                help="TCP port of this host's libvirtd that a source's "
                     "libvirtd connects to for peer-to-peer migration. "
                     "Unset: the scheme's default (16509 for tcp). Set it "
                     "only when libvirtd listens elsewhere, e.g. several "
                     "test hosts on one machine."),
    cfg.IntOpt('live_migration_downtime', default=500, min=100,
               help="Maximum downtime allowed at the end of a live "
                    "migration, in ms; reached in steps (see below)."),
    cfg.IntOpt('live_migration_downtime_steps', default=10, min=3,
               help="Number of increments to reach live_migration_downtime."),
    cfg.IntOpt('live_migration_downtime_delay', default=75, min=3,
               help="Seconds to wait between downtime increments, scaled by "
                    "guest memory in GiB (minimum one step per delay)."),
    cfg.IntOpt('live_migration_completion_timeout', default=800, min=0,
               help="Seconds per GiB of guest memory a migration may take "
                    "before live_migration_timeout_action is taken. 0 "
                    "disables the timeout."),
    cfg.StrOpt('live_migration_timeout_action', default='abort',
               choices=[('abort', 'cancel the migration; the guest stays on '
                                  'the source'),
                        ('force_complete', 'switch to post-copy if permitted, '
                                           'else pause the guest so it '
                                           'converges')],
               help="What to do when a migration exceeds its completion "
                    "timeout."),
    cfg.IntOpt('live_migration_bandwidth', default=0, min=0,
               help="Maximum migration bandwidth in MiB/s; 0 is unlimited."),
    cfg.BoolOpt('live_migration_permit_post_copy', default=False,
                help="Allow switching to post-copy when a migration does "
                     "not converge. The guest runs on the destination "
                     "sooner; if the migration connection drops during "
                     "post-copy the guest is paused on both hosts until "
                     "numamig resumes it (see "
                     "live_migration_postcopy_recovery_timeout; needs "
                     "libvirt 8.5 and QEMU 3.0 or later, else the guest "
                     "stays paused)."),
    cfg.BoolOpt('live_migration_permit_auto_converge', default=False,
                help="Allow libvirt to throttle the guest's vCPUs so a "
                     "busy guest converges. Ignored when post-copy is "
                     "permitted and available."),
    cfg.BoolOpt('live_migration_with_native_tls', default=False,
                help="Encrypt migration streams with QEMU's native TLS. "
                     "Both hosts need certificates configured in qemu.conf."),
    cfg.StrOpt('live_migration_compression', default='none',
               choices=[('none', 'no compression'),
                        ('zlib', 'zlib on each parallel connection'),
                        ('zstd', 'zstd on each parallel connection (less '
                                 'CPU than zlib for a better ratio)')],
               help="Compress the migration stream's parallel connections "
                    "(QEMU multifd compression). Needs "
                    "live_migration_parallel_connections >= 2 and libvirt "
                    ">= 9.4 on the source: a migration from an older "
                    "libvirt is refused when it starts, before anything "
                    "moves. Worth it on links slower than the hosts' "
                    "CPUs can compress."),
    cfg.StrOpt('migration_thread_cpus',
               help="A housekeeping set of pCPUs (a CPU list such as '1,9' "
                    "or '2-3') for QEMU's migration threads, on both hosts "
                    "of a migration (source: live_migration, "
                    "multifdsend_N, return path; destination: "
                    "multifdrecv_N, postcopy/listen, fault-default), "
                    "pinned as they appear. It wins over the set numamig "
                    "derives itself, less any pCPU a dedicated guest is "
                    "pinned to. Unset: the host's shared CPUs ([compute] "
                    "cpu_shared_set) on the NUMA nodes holding the guest's "
                    "memory, else on any node, less pinned ones; with "
                    "none, the threads stay where they start (the guest's "
                    "emulator pCPUs). Pinning needs the agent to run as "
                    "root; where the threads ran is recorded on the "
                    "migration either way."),
    cfg.IntOpt('live_migration_parallel_connections', default=1, min=1,
               help="Parallel connections for the migration stream; above "
                    "1 enables libvirt's parallel migration. Each "
                    "connection is a QEMU thread, so a migration uses at "
                    "most as many as there are CPUs for its threads on the "
                    "source (see migration_thread_cpus), but never fewer "
                    "than 2 once above 1. With live_migration_compression "
                    "on, the configured number is used as it is (the "
                    "compressed channels were sized for the link). The "
                    "number used is logged and recorded on the "
                    "migration."),
    cfg.StrOpt('live_migration_policy', default='timer',
               help="Convergence policy of migrations whose flavor "
                    "(hw:live_migration_policy), image "
                    "(hw_live_migration_policy) and request (numamig-manage "
                    "migration start --policy) name none. Shipped: 'timer' "
                    "(downtime raised on a timer by "
                    "live_migration_downtime*, then "
                    "live_migration_timeout_action: the behaviour before "
                    "policies existed), 'nfv' (50-200 ms by stalled memory "
                    "pass, then post-copy, then abort), 'finish' (100-500 "
                    "ms, then auto-converge, post-copy, pause: it always "
                    "ends), 'never_pause' (as finish but abort instead of "
                    "pausing); or a name from live_migration_policies. The "
                    "conductor and every compute host must know the same "
                    "names."),
    cfg.MultiStrOpt('live_migration_policies', default=[],
                    help="Operator-defined convergence policies, one per "
                         "line: 'NAME: downtime=MS,MS,...; then=TIER,...; "
                         "stall_iterations=N; min_progress=PCT'. Every "
                         "stall_iterations passes over memory in which the "
                         "remaining bytes shrank by less than min_progress "
                         "percent (a stall), the next downtime step is "
                         "allowed; once they are used up, each further "
                         "stall applies the next tier: auto_converge, "
                         "post_copy, pause or abort (pause and abort end "
                         "the list; a tier after post_copy applies only if "
                         "the switch fails). Past "
                         "live_migration_completion_timeout the last tier "
                         "applies at once. 'NAME: timer' names the timer "
                         "behaviour. A shipped name here replaces the "
                         "shipped policy. Example: 'gold: downtime=100,200,"
                         "400; then=post_copy,abort; stall_iterations=2'."),
    cfg.BoolOpt('live_migration_policy_observe_only', default=False,
                help="Run every migration with the timer behaviour and only "
                     "log, per stalled memory pass, what its policy would "
                     "have done ('observe-only: policy P would ...'): a way "
                     "to try a policy on live traffic before it acts."),
    cfg.FloatOpt('live_migration_dirty_rate_deadline', default=10.0,
                 min=1.0, max=120.0,
                 help="Seconds a guest's dirty-rate measurement (the "
                      "pre-flight convergence prediction) may take per "
                      "mode tried before it counts as unmeasurable and the "
                      "prediction says 'unknown'. Each measurement itself "
                      "lasts 1 s."),
    cfg.IntOpt('live_migration_postcopy_recovery_timeout', default=600,
               min=0, max=86400,
               help="Seconds after a post-copy migration lost its connection "
                    "during which numamig keeps trying to resume it "
                    "(VIR_MIGRATE_POSTCOPY_RESUME), at intervals of 1, 2, "
                    "4... up to 30 s, one last time at the end. Meanwhile "
                    "the guest is paused (it cannot run on either host "
                    "alone); past it the migration waits "
                    "'postcopy-paused', both hosts' claims kept, until an "
                    "operator resumes it ('numamig-manage migration "
                    "resume', which runs one more recovery within this "
                    "timeout). Longer keeps a guest paused longer through "
                    "an outage; 0 disables recovery."),
    cfg.IntOpt('live_migration_postcopy_recovery_attempts', default=20,
               min=0, max=1000,
               help="Resume attempts per loss of a post-copy migration's "
                    "connection before numamig gives up (see "
                    "live_migration_postcopy_recovery_timeout); 0 "
                    "disables recovery."),
    cfg.IntOpt('live_migration_postcopy_resume_attempt_timeout', default=30,
               min=1, max=3600,
               help="Seconds one resume attempt may take to get the "
                    "migration stream moving again; one that has not "
                    "(a link that drops packets silently) is interrupted "
                    "and counts as failed. Raise it for links that take "
                    "long to connect."),
    cfg.IntOpt('live_migration_progress_interval', default=1, min=1,
               help="Seconds between polls of a running migration's job "
                    "statistics (progress reporting and timeouts)."),
]

guard_opts = [
    cfg.BoolOpt('migration_guard', default=False,
                help="Install the destination-side migration guard: a "
                     "libvirt qemu hook that checks every incoming "
                     "migration's domain XML against this host's move "
                     "claim for the guest, rewrites its NUMA parts to the "
                     "claim (pins, numatune, page nodesets) or refuses the "
                     "migration when they cannot be reconciled. Enable it "
                     "on every compute host before a rolling upgrade: a "
                     "source of an older release copies the XML verbatim, "
                     "and only the destination's guard then places the "
                     "guest where its claim says. libvirtd runs hooks "
                     "present when it started: restart libvirtd after the "
                     "agent's first start with this option (see "
                     "doc/source/upgrades.rst)."),
    cfg.StrOpt('migration_guard_hook_path',
               default='/etc/libvirt/hooks/qemu.d/numamig-migration-guard',
               help="Where the agent writes the guard's hook. libvirt 6.5 "
                    "and later run every executable of "
                    "/etc/libvirt/hooks/qemu.d/ as a filter after the "
                    "main qemu hook; with an older libvirt use "
                    "/etc/libvirt/hooks/qemu. A file there that numamig "
                    "did not write is never overwritten (the guard is then "
                    "reported failed). Change it only where libvirt looks "
                    "for hooks elsewhere (its SYSCONFDIR)."),
    cfg.StrOpt('migration_guard_claims_file',
               default='/var/lib/numamig/migration-guard-claims.json',
               help="The file the agent publishes its move claims to and "
                    "the guard reads (mode 0640, rewritten atomically). It "
                    "must be on a local file system both the agent and "
                    "libvirtd see at this path."),
    cfg.IntOpt('migration_guard_claims_max_age', default=60, min=6,
               max=3600,
               help="Seconds after which the guard treats the claims file "
                    "as stale (the agent is down) and applies "
                    "migration_guard_when_unknown. The agent rewrites the "
                    "file whenever its claims change and every third of "
                    "this. Raise it only if the agent's host is so loaded "
                    "that it misses such rewrites."),
    cfg.StrOpt('migration_guard_when_unknown', default='pass',
               choices=[('pass', 'let the XML through unchanged and log '
                                 'it: the guard never fails a migration '
                                 'that would run without it'),
                        ('refuse', 'refuse the incoming migration: no '
                                   'unchecked XML ever runs here')],
               help="What the guard does when it cannot know this host's "
                    "claims (claims file missing, stale or unreadable, or "
                    "its deadline passed). numamig's own migrations need "
                    "the agent up (it claims before the migration starts), "
                    "so an unknown claim set mostly means a migration "
                    "started outside numamig or a dead agent; choose "
                    "refuse where every migration must go through "
                    "numamig."),
    cfg.FloatOpt('migration_guard_deadline', default=5.0, min=0.5,
                 max=60.0,
                 help="Seconds the guard may take for one incoming "
                      "migration; past them (a hung file system) it "
                      "answers as migration_guard_when_unknown says. It "
                      "normally takes about a tenth of a second."),
    cfg.StrOpt('migration_guard_log_file',
               default='/var/log/numamig/migration-guard.log',
               help="Where the guard appends one line per incoming "
                    "migration: what it changed, passed or refused, and "
                    "why. Unset: standard error, which libvirt logs only "
                    "for a refused migration."),
]

opts = connection_opts + migration_opts + guard_opts


def register_opts(conf):
    conf.register_group(libvirt_group)
    conf.register_opts(opts, group=libvirt_group)


def list_opts():
    return {libvirt_group: opts}
