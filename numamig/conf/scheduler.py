"""Options of the [scheduler] group: choosing live-migration destinations."""

from oslo_config import cfg

scheduler_group = cfg.OptGroup(
    'scheduler', title='Destination scheduling',
    help="How the conductor picks destinations from hosts' reports.")

opts = [
    cfg.IntOpt('reservation_timeout', default=300, min=1,
               help="Seconds an in-flight placement stays reserved in the "
                    "scheduler's host cache when no report confirms it "
                    "(its fingerprint never matches) and no release "
                    "comes. Lower it if a lost migration keeps a host "
                    "looking full; keep it well above report_interval "
                    "plus the time a destination takes to claim, or the "
                    "scheduler offers the same resources twice."),
    cfg.IntOpt('max_candidates', default=10, min=1,
               help="How many hosts the scheduler returns as destination "
                    "candidates for one migration, best first. The "
                    "conductor tries at most migrate_max_retries + 1 of "
                    "them; raise this only together with that option."),
    cfg.StrOpt('strategy', default='spread',
               choices=[
                   ('spread', "Emptiest hosts first: load stays even and "
                              "concurrent migrations rarely collide on "
                              "one host."),
                   ('pack', "Fullest hosts that still fit first: keeps "
                            "whole hosts free for large guests and for "
                            "maintenance."),
               ],
               help="Order in which the scheduler offers destination "
                    "hosts. A host's fullness is the mean free share of "
                    "its dedicated pCPUs, shared CPUs, memory and huge "
                    "pages, counting in-flight migrations; ties go to the "
                    "alphabetically first host."),
    cfg.IntOpt('drain_plan_max_steps', default=20000, min=100,
               max=10000000,
               help="Placements a drain plan (numamig-manage host drain) "
                    "may try while it searches for a destination and an "
                    "order on it for every guest of a host; also the sets "
                    "a defragmentation plan (host defragment) may try, "
                    "and the placements of each set's drain search. Each "
                    "costs well under a millisecond. A search that ends "
                    "short of the limit without a plan has its 'no plan "
                    "exists' proven by trying every order, within 9 "
                    "times as many placements more (tight hosts: a few "
                    "seconds). A plan that reaches "
                    "the limit answers 'no plan found within N "
                    "placements', never 'no plan exists', and names the "
                    "guests it found no room for; raise it when such an "
                    "answer is given for a host you believe can be "
                    "emptied, lower it if plans take too long."),
]


def register_opts(conf):
    conf.register_group(scheduler_group)
    conf.register_opts(opts, group=scheduler_group)


def list_opts():
    return {scheduler_group: opts}
