"""numamig-manage instance memory set / host reclaim: ask, then print.

Both ask the conductor (conductor API 1.11), which plans with
numa.reclaim, records the change under a uuid this command chooses (a
request sent again is answered from the record) and has the guests'
agents carry it out. What is printed: the plan (where the memory comes
from: the node, elsewhere, best effort) and, unless --dry-run, what the
guests really did.
"""

from oslo_utils import uuidutils

from numamig import exception
from numamig.cmd import common
from numamig.cmd.manage_commands import _access
from numamig.conf import CONF

# How long the command waits for the conductor beyond the guests'
# deadlines ([virtio_mem] resize_timeout each, one guest at a time).
CALL_MARGIN_S = 30
# The most guests a timeout is sized for (a host reclaim takes from at
# most this many before the call gives up waiting; the change goes on).
TIMEOUT_GUESTS = 16
MAX_SIZE_MB = 64 * 1024 * 1024


def check(node, size_mb, minimum=0):
    """Refuse a node or size out of range before asking anyone."""
    if not 0 <= node <= 1023:
        raise exception.Invalid(reason=f"--node must be 0 to 1023, got "
                                       f"{node}")
    if not minimum <= size_mb <= MAX_SIZE_MB:
        raise exception.Invalid(
            reason=f"--size must be {minimum} to {MAX_SIZE_MB} MiB, got "
                   f"{size_mb}")


def run(method, output_format, **kwargs):
    """Ask the conductor; print the change; return the exit code.

    0: done (or planned) and the target reached; 1: short of the target
    or a guest did not answer in time (what it did is recorded).
    """
    timeout = CONF.virtio_mem.resize_timeout * TIMEOUT_GUESTS + \
        CALL_MARGIN_S
    api = _access.conductor(timeout=timeout)
    answer = getattr(api, method)(_access.context(),
                                  uuidutils.generate_uuid(), **kwargs)
    common.print_output(answer, output_format, show)
    problem = why_not(answer)
    if problem is None:
        return common.EXIT_OK
    # stderr only: stdout already holds the change.
    return common.fail(problem, common.EXIT_NO)


def why_not(answer):
    """The one line saying why a change answers 1; None when it
    reached its target (or, dry run, would)."""
    plan, result = answer.get('plan') or {}, answer.get('result') or {}
    change = f"memory change {answer['uuid']} on {answer['host']}"
    if answer.get('status') == 'failed':
        return f"{change} failed: {result.get('error')}"
    guests = result.get('guests') or ()
    refused = [g for g in guests if g.get('error')]
    if refused:
        return (f"{change}: {len(refused)} of {len(guests)} guests "
                f"refused; {refused[0]['instance']}: "
                f"{refused[0]['error']}")
    late = [g['instance'] for g in guests if not g.get('reached')]
    if late:
        return (f"{change}: {', '.join(late)} did not reach the size asked "
                f"within [virtio_mem] resize_timeout "
                f"({CONF.virtio_mem.resize_timeout} s); what they did is "
                f"recorded")
    if plan.get('short_mb'):
        verb = 'would be' if answer.get('status') == 'planned' else 'is'
        why = '; '.join(plan.get('notes') or ()) or \
            "the guests' devices cannot give or take more"
        return (f"{change} {verb} {abs(plan['short_mb'])} MiB short of "
                f"{abs(plan.get('wanted_mb') or 0)} MiB: {why}")
    return None


def show(data):
    plan = data.get('plan') or {}
    print(f"Memory change {data['uuid']} on {data['host']}: "
          f"{data['status']}")
    kind = 'exact' if plan.get('exact') else 'best effort'
    print(f"  node {plan.get('node')} ({kind}): asked "
          f"{plan.get('wanted_mb')} MiB, on the node "
          f"{plan.get('on_node_mb')} MiB, elsewhere "
          f"{plan.get('elsewhere_mb')} MiB, best effort (one-to-many) "
          f"{plan.get('best_effort_mb')} MiB, short {plan.get('short_mb')}"
          f" MiB")
    for step in plan.get('steps', ()):
        print(f"  {step['instance_uuid']} cell {step['cell']} (host nodes "
              f"{step['nodes']}): {step['before_mb']} -> "
              f"{step['after_mb']} MiB")
    for note in plan.get('notes', ()):
        print(f"  note: {note}")
    result = data.get('result') or {}
    if 'error' in result:
        print(f"  failed: {result['error']}")
    for guest in result.get('guests', ()):
        if guest.get('error'):
            print(f"  {guest['instance']}: refused: {guest['error']}")
            continue
        state = 'reached' if guest['reached'] else 'NOT reached in time'
        print(f"  {guest['instance']}: {state}; now {guest['current']}, "
              f"released {guest['released_mb']} MiB")
    if 'released_mb' in result:
        print(f"  released on the host: {result['released_mb']} MiB")
