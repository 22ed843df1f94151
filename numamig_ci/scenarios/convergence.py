"""Convergence-policy scenarios: a migration that cannot converge by
itself, run under a policy requested for it, on real QEMU.

The guest keeps rewriting a small set of its memory and its copy is
capped (``post_copy_hold``, numamig_ci.postcopy_cut), so every pass
resends all of it and only the policy ends the job. What the policy did
is read twice: from numamig's record of the migration (its convergence
actions and outcome) and from libvirt and QEMU beside numamig
(numamig_ci.job_watch): every downtime step recorded must be the
maximum downtime QEMU had, in order; an auto-converge tier recorded must
show as QEMU throttling the vCPUs; the post-copy recorded as libvirt
suspending the source for post-copy. The policies are the deployment's
own definitions of the names: only their shape is assumed (downtime
steps first, then tiers, ending in post-copy for a job that stalls).
"""

from numamig.objects import fields
from numamig_ci import job_watch
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED
from numamig_ci.session import describe

STATUS = fields.MigrationStatus
ALLOW = 'allow '
STARTS = '(the job starts)'


@scenario('policy-finish',
          "A migration that cannot converge by itself, run under the "
          "'finish' policy (requested for it): each stalled pass allows "
          "the next downtime step, then auto-converge, then post-copy; "
          "every step recorded was QEMU's maximum downtime, QEMU "
          "throttled the vCPUs, libvirt suspended the source for "
          "post-copy; the guest runs on the destination with its new "
          "pins.", requires=('post_copy_hold',))
def policy_finish(s):
    _escalation(s, 'finish')


@scenario('policy-never-pause',
          "The same under 'never_pause', whose tiers end in abort rather "
          "than pause: a stalled migration still ends by post-copy, and "
          "libvirt never suspended the source but for it.",
          requires=('post_copy_hold',))
def policy_never_pause(s):
    _escalation(s, 'never_pause')


def _escalation(s, policy):
    src, dst = s.pair()
    # The destination's claim must then pin the guest elsewhere.
    s.create(dst, 1, specs=dict(DEDICATED), label='resident')
    guest = s.create(src, 1, specs=dict(DEDICATED),
                     label=policy.replace('_', '-'))
    with s.backend.post_copy_hold(src, guest), \
            job_watch.JobWatch(s.backend.libvirt_uri(src),
                               guest.uuid) as watch:
        migration = s.api.live_migrate_instance(s.ctxt, guest.uuid, dst,
                                                policy=policy)
        migration = s.wait(migration.uuid)
    s.say(f"migration of {guest.name} under {policy}: {migration.status}; "
          f"QEMU had downtimes {watch.downtimes} ms, throttle up to "
          f"{watch.throttle} %, {watch.passes} passes; libvirt suspended "
          f"the source {watch.suspensions()}")
    if not s.expect_status(migration, guest, STATUS.COMPLETED):
        return
    # How it converged: MigrationConvergence, a satellite record.
    recorded = s.api.migration_get_satellites(
        s.ctxt, migration.uuid, ['convergence'])['convergence']
    actions = list(recorded.actions or ())
    s.say(f"numamig recorded: {actions}")
    if recorded.policy != policy:
        s.fail(guest, src, 'record convergence_policy', policy,
               recorded.policy)
    _check_actions(s, guest, src, migration, actions, watch)
    record = s.check_placed(guest, dst)
    old, new = (dict(r.numa_topology.cpu_pinning) for r in (guest, record))
    if old == new:
        s.fail(guest, dst, 'record numa_topology.cpu_pinning',
               f"the destination's claim, not the source's {old}", new)
    s.say(f"{guest.name} on {record.host}: {describe(record)}")
    s.check_host(src)


def _check_actions(s, guest, src, migration, actions, watch):
    """The recorded actions have the policy's shape and each reached
    QEMU or libvirt."""
    steps = [a for a in actions if a.startswith(ALLOW)]
    tiers = actions[len(steps):]
    if not steps or not actions[0].endswith(STARTS) or \
            any(a.startswith(ALLOW) for a in tiers):
        s.fail(guest, src, 'record convergence_actions',
               f"downtime steps from '{STARTS}', then tiers", actions)
        return
    downtimes = [int(a[len(ALLOW):].split(' ', 1)[0]) for a in steps]
    if len(steps) < 2 or downtimes != sorted(downtimes):
        s.fail(guest, src, 'record convergence_actions downtime steps',
               'several, growing, one per stalled pass', downtimes)
    if not watch.steps_after_default(downtimes):
        s.fail(guest, src, "QEMU's maximum downtime "
               "(virDomainMigrateGetMaxDowntime) during the job",
               f"the recorded steps {downtimes}", watch.downtimes)
    if not tiers or not tiers[-1].startswith('post-copy (pass '):
        s.fail(guest, src, 'record convergence_actions tiers',
               'ending in post-copy on a stalled pass', tiers)
    if not migration.get('post_copy'):
        s.fail(guest, src, 'record post_copy', True,
               migration.get('post_copy'))
    if any(t.startswith('auto-converge') for t in tiers) and \
            watch.throttle <= 0:
        s.fail(guest, src, "QEMU's vCPU throttle (job statistics "
               "auto_converge_throttle)", 'above 0 % after auto-converge',
               watch.throttle)
    if watch.suspensions()[-1:] != [job_watch.SUSPENDED_POSTCOPY]:
        s.fail(guest, src, "libvirt's lifecycle events of the source",
               'suspended for post-copy, last',
               watch.events)
