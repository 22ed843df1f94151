"""Options of the [conductor] group."""

from oslo_config import cfg
from oslo_config import types

conductor_group = cfg.OptGroup('conductor', title='Conductor service')

opts = [
    cfg.IntOpt('workers', min=1,
               help="Number of conductor worker processes. Unset: one per "
                    "CPU. Workers share the database (PostgreSQL or "
                    "MariaDB; with SQLite only one worker runs); raise it "
                    "when migrations queue behind each other."),
    cfg.IntOpt('stalled_migration_interval', default=10, min=1,
               help="Seconds between looks for migrations a dead "
                    "conductor worker left behind: admitted ones whose "
                    "worker stopped renewing its lease (every 5 s, "
                    "lasting 15 s), and ones queued for their source "
                    "longer than twice [DEFAULT] "
                    "rpc_response_timeout_migration. "
                    "Such migrations are ended with the reason and their "
                    "claims released. With the default, a conductor "
                    "crash is cleaned up 15-30 s later; lower it to "
                    "recover sooner, raise it to query the database "
                    "less."),
    cfg.StrOpt('convergence_prediction', default='off',
               choices=[('off', 'predict only in dry runs (as before)'),
                        ('record', 'predict before claiming and record the '
                                   'prediction on the migration'),
                        ('refuse', 'as record, and end a migration '
                                   'predicted not to converge (error) '
                                   'before anything is claimed'),
                        ('choose', 'as record, and run a migration '
                                   'predicted not to converge under the '
                                   'first of convergence_fallback_policies '
                                   'predicted to end it; refuse it if none '
                                   'is (a policy requested with --policy '
                                   'is never replaced)')],
               help="Whether the conductor predicts a migration's "
                    "convergence before choosing its destination: the "
                    "source samples the guest's dirty rate ([libvirt] "
                    "live_migration_dirty_rate_deadline) and compares it "
                    "with its bandwidth, downtime limit and the "
                    "migration's policy. An unknown prediction (no "
                    "dirty-rate measurement on that hypervisor, no "
                    "bandwidth figure) never refuses. Needs compute API "
                    "1.6 on the source."),
    cfg.ListOpt('convergence_fallback_policies',
                default=['never_pause', 'finish'],
                help="With convergence_prediction = choose: the policies "
                     "tried, in order, for a migration predicted not to "
                     "converge under its own (names of [libvirt] "
                     "live_migration_policies or the shipped ones)."),
    cfg.IntOpt('migration_workers', default=8, min=1, max=256,
               help="Threads per conductor worker that choose a "
                    "destination and take its claim for admitted "
                    "migrations. They are the only conductor threads that "
                    "wait on compute agents for a migration; RPC threads "
                    "only record and queue, so no RPC pool waits on "
                    "itself. Raise it when many migrations wait in "
                    "'accepted' while hosts are idle; each thread waits "
                    "at most [DEFAULT] rpc_response_timeout_migration per "
                    "destination tried."),
    cfg.IntOpt('report_writers', default=4, min=1, max=64,
               help="Threads of a conductor worker that write agents' "
                    "reports to the database at once, each a batch of the "
                    "reports waiting in one transaction; the other "
                    "requests wait on the agents' RPC threads, holding no "
                    "database connection. "
                    "It bounds what a burst of reports (every agent "
                    "restarting, a broker coming back) takes of the "
                    "database's connections: with W workers, the reports "
                    "hold at most W x report_writers of them, the rest of "
                    "[database] max_pool_size + max_overflow per worker "
                    "stays for migrations and operators. Raise it only if "
                    "reports queue while the database is idle "
                    "(doc/source/control-plane.rst)."),
    cfg.IntOpt('report_sync_interval', default=0, min=0, max=300,
               help="Seconds between a conductor worker's reads of the "
                    "reports other workers (of this conductor or of "
                    "conductors on other hosts) stored; 0 (the default): "
                    "read them only when a request needs them, which "
                    "reads only what changed since the worker last looked. "
                    "A report that says what the worker holds already "
                    "costs a digest; only a host the worker has never "
                    "seen, or whose usage changed, is built whole (3-4 ms "
                    "each). Set it (e.g. 5) where many hosts join at once "
                    "and the conductor has CPU to spare: the first "
                    "migration after 10,000 new hosts then does not build "
                    "them (87 s measured), but on two cores the reads cost "
                    "migrations more than they saved (median 9.5 s instead "
                    "of 0.7 s; doc/source/control-plane.rst)."),
    cfg.IntOpt('database_outage_wait', default=60, min=0, max=3600,
               help="Seconds a migration whose destination is being "
                    "chosen waits for the database when it finds it "
                    "unreachable. Within this wait the migration goes on "
                    "by itself within about 2 s of the database's return "
                    "(any claim taken is dropped and its destination "
                    "chosen again; it keeps its place in the queue), "
                    "and nothing is recorded as failed. Past it, the "
                    "migration ends 'error' with that reason once the "
                    "database answers, and its claim is released; start "
                    "it again then. Raise it above the longest database "
                    "failover you expect (a standby's promotion, a "
                    "restart) so that none fails a migration; lower it "
                    "to learn sooner that migrations cannot go on. "
                    "Agents wait about as long (three times a third of "
                    "[DEFAULT] rpc_response_timeout) to record a running "
                    "migration's progress."),
    cfg.IntOpt('migration_watchers', default=16, min=0, max=1024,
               help="Operators' waits ('numamig-manage migration start "
                    "--wait') that a conductor worker holds at once, "
                    "each answered the moment the migration changes. "
                    "Each holds one of the operators' RPC threads "
                    "([DEFAULT] executor_thread_pool_size; agents have "
                    "threads of their own) for up to 30 s; a wait beyond "
                    "this number is answered at once and its command "
                    "polls instead. 0: every command polls."),
    cfg.IntOpt('max_concurrent_migrations', default=64, min=1,
               max=100000,
               help="Migrations in flight at once in the whole cloud "
                    "(admitted until they end). Further requests wait in "
                    "the persisted queue, highest priority first, and "
                    "'numamig-manage migration list' shows their "
                    "position. Raise it when the network and the hosts "
                    "can carry more copies at once."),
    cfg.IntOpt('max_outgoing_migrations_per_host', default=4, min=1,
               max=1000,
               help="Migrations in flight at once out of one source "
                    "host. Each one copies the guest's memory over the "
                    "host's network; a drain of a host runs this many at "
                    "a time."),
    cfg.IntOpt('max_incoming_migrations_per_host', default=4, min=1,
               max=1000,
               help="Migrations in flight at once into one destination "
                    "host. A host at this limit is skipped by the "
                    "scheduler until one of its incoming migrations "
                    "ends; a migration that names it waits in the "
                    "queue."),
    cfg.IntOpt('max_queued_migrations', default=10000, min=1,
               max=1000000,
               help="Migrations that may wait for admission at once. A "
                    "request beyond it is refused at once with a "
                    "message saying the queue is full, so that a "
                    "runaway script cannot grow the queue without "
                    "bound."),
    cfg.IntOpt('drain_parallel', default=4, min=1, max=64,
               help="Moves a drain ('numamig-manage host drain HOST') "
                    "runs at once unless the operator gives --parallel. "
                    "Moves into one destination take their claims one "
                    "after another, in the plan's order (a move starts "
                    "once the one before it into that host runs); "
                    "max_outgoing_migrations_per_host bounds them too. "
                    "Each move costs seconds outside its copy (set-up, "
                    "switch-over) that moves at once hide: 4 emptied a "
                    "host of written guests within 1.15x of its link's "
                    "bound where 2 took 1.35x (doc/source/drain.rst, "
                    "'A drain against its link'). With the source's "
                    "link rate known (migration_link_rate(s)) it is the "
                    "most: a move waits while a migrating guest whose "
                    "pre-flight prediction sampled a dirty rate "
                    "(convergence_prediction not 'off') would keep less "
                    "than 1.25 times that rate of the link. Raise it "
                    "when the network carries more copies at once."),
    cfg.IntOpt('migration_link_rate', default=0, min=0, max=1000000,
               help="MiB/s of a host's migration link (the network its "
                    "migration streams leave and arrive by), for hosts "
                    "migration_link_rates does not name. A drain plan "
                    "('numamig-manage host drain HOST --dry-run') says "
                    "the least time its moves take: the memory of the "
                    "guests it moves over the rate of the host's link. "
                    "A drain also keeps each dirtying guest's share of "
                    "it (drain_parallel). "
                    "0: unknown, the plan says nothing of time. Set it "
                    "to what a migration stream measurably gets (TCP "
                    "payload, not the NIC's line rate), or to "
                    "[libvirt] live_migration_bandwidth where that caps "
                    "every stream and one stream runs at a time."),
    cfg.Opt('migration_link_rates', default={},
            type=types.Dict(value_type=types.Integer(min=1, max=1000000)),
            help="Per-host migration link rates in MiB/s, "
                     "HOST:MIB_S,HOST:MIB_S (for instance "
                     "compute-1:1100,compute-2:110); hosts not named "
                     "have migration_link_rate."),
    cfg.IntOpt('drain_estimate_max_age', default=600, min=0, max=86400,
               help="Seconds old a source's sample of a guest's dirty "
                    "rate may be for a drain to order its moves and "
                    "choose their policies from it ([compute] "
                    "dirty_rate_sample_interval samples in the "
                    "background). Guests without so young a sample are "
                    "sampled when the drain starts, one 1 s window for "
                    "all, before any move. Lower it where guests change "
                    "how they write within minutes; 0: always sample "
                    "when the drain starts."),
    cfg.IntOpt('drain_replan_attempts', default=2, min=0, max=10,
               help="Times a drain plans a guest again onto another "
                    "host after its destination refused it (its claim "
                    "did not fit, it was down or disabled). A guest "
                    "refused once more ends its move failed with every "
                    "refusal's reason. 0: a refusal fails the move."),
    cfg.IntOpt('defragment_verify_timeout', default=120, min=1,
               max=3600,
               help="Seconds a defragmentation ('numamig-manage host "
                    "defragment --execute') whose moves ended waits "
                    "for its target host to report, so that it can say "
                    "whether the room for the guest is there. Past it, "
                    "the defragmentation ends failed, saying the host "
                    "did not report; raise it above the agents' "
                    "report_interval when their reports come slower."),
    cfg.FloatOpt('live_migratable_interval', default=10.0, min=0,
                 max=3600,
                 help="Seconds between two looks of each conductor "
                      "worker at the hosts' reports and the guests, to "
                      "keep every guest's standing live-migratable "
                      "answer ('numamig-manage instance list/show', the "
                      "numamig_instances_live_migratable metric). Each "
                      "look re-checks only the guests a changed host "
                      "concerns. Lower it for fresher answers; 0 keeps "
                      "no answer (the column shows '-')."),
    cfg.IntOpt('live_migratable_budget', default=200, min=1,
               max=100000,
               help="Guests a look examines whole at most (a full "
                    "scheduler selection each, about a millisecond at "
                    "10,000 hosts); the others wait for the next look. "
                    "Raise it when 'numamig-manage instance list' shows "
                    "answers older than a few intervals on a large "
                    "cloud."),
]


def register_opts(conf):
    conf.register_group(conductor_group)
    conf.register_opts(opts, group=conductor_group)


def list_opts():
    return {conductor_group: opts}
