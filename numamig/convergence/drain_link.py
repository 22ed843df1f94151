"""A drain's moves sharing their source's migration link.

Every move of a drain leaves by one link, and the moves copying at once
share it about equally (one TCP stream each). Two things follow, and
the choices here are made from them:

* a move spends seconds outside its copy (set-up, switch-over: 2.0-2.2 s
  a move measured on the real tier, doc/source/drain.rst), during which
  the link idles unless another move copies: moves at once hide it, so
  a drain runs several (``[conductor] drain_parallel``, the most);
* a guest dirtying memory at a rate D converges in pre-copy only while
  its share of the link S is above D, and each pass resends D/S of the
  one before: the bytes sent again grow as D/S nears 1. A move may
  therefore start only while every pre-copy running keeps a share of at
  least ``margin`` times its dirty rate (``may_start``): with the margin
  of 1.25, each pass carries at most 0.8 of the one before, so the
  passes after the first carry in all at most 5 times what the first
  left dirty (1 + 0.8 + 0.64 + ...), where at D/S = 0.95 they carry 20
  times it, and at D/S >= 1 pre-copy never ends while the share lasts.
  Starting fewer moves while a dirtying guest copies costs the overlap
  of the fixed costs; starving it costs its pages again and again, and
  its convergence. Measured on the real tier (doc/source/drain.rst,
  "Sharing the link"): with a guest dirtying 12 MiB/s among five on a
  32 MiB/s link, a margin of 1.25 (two moves at once while it copies)
  took 1.34x the link's bound where 4 at once took 1.51x (sending
  pages again 2.6 times as much), and a margin of 2 (it copies alone)
  1.50x: the fixed costs of the moves then lie bare.

The order: among the moves whose claims may come next (moves into one
destination keep the plan's order, since each destination claim fits on
what the plan fitted it on), the dirtiest first, then the largest
(``order``). A dirtying guest started first copies while few moves have
started and is out of the way before the link is shared widest; the
idle guests, whose time does not depend on their share, fill the link
behind it, and the drain's last moves (which copy alone and pay their
switch-over alone) are guests that send nothing again. Measured on the
real tier against its reverse (bench_drain_real.py's ``cleanfirst``):
no difference beyond the rounds' spread (1.39x against 1.36x of the
link's bound; the share rule gave both their gain over 1.55x), so it is
kept for what it does, not for a measured gain; no claim that it is the
best order is made.

Post-copy per move (``policy_for``): where the prediction at the share
the move gets says pre-copy cannot converge within its policy's
downtime, the first fallback policy predicted to end it is chosen
(post-copy ends a copy whatever the dirty rate). Compression is not
chosen here: its gain is a ratio no prediction here knows (it is never
guessed), and it costs CPU on both hosts.

Where the rates come from: the drain driver asks the source, before
its first move starts, to sample every guest's dirty rate at once
(compute API ``sample_dirty_rates``: libvirt's page sampling, one
window of a second for all), and records them with the figures of the
source's settings a prediction needs (``predictor``); a migration's own
pre-flight sample, once taken, replaces its guest's estimate.

Pure: figures in, answers out; the conductor's turn rule
(numamig.db.drains.turns) and the real-tier benchmark both call it.
"""

import dataclasses

from numamig.convergence import predict

#: A pre-copy keeps a share of the link at least this many times its
#: guest's dirty rate while other moves start (measured against 2: see
#: the module's docstring).
SHARE_MARGIN = 1.25


@dataclasses.dataclass(frozen=True)
class Cost:
    """What a move costs the link.

    :param memory: bytes of guest memory to copy.
    :param dirty_rate: bytes per second the guest is predicted to dirty,
        None when unknown (no constraint is made up for it).
    :param post_copy: its migration ends by post-copy: it needs no share
        to converge.
    """

    memory: int = 0
    dirty_rate: float | None = None
    post_copy: bool = False

    def needs(self, margin=SHARE_MARGIN):
        """Bytes per second of the link its pre-copy must keep."""
        if self.post_copy or not self.dirty_rate:
            return 0.0
        return self.dirty_rate * margin


def may_start(link_rate, running, candidate, margin=SHARE_MARGIN):
    """Whether ``candidate`` may start beside the ``running`` Costs on a
    link of ``link_rate`` (bytes/s; None or 0: unknown, any may).

    The first move always starts (alone it has the whole link: if even
    that is too little, only its policy ends it).
    """
    if not running or not link_rate:
        return True
    share = link_rate / (len(running) + 1)
    return all(cost.needs(margin) <= share
               for cost in (*running, candidate))


def order(moves, host_of, cost_of):
    """The moves in the order to start them: of the first move still to
    start into each destination, the dirtiest (then the largest, then
    the plan's order) goes next; so moves into one destination keep the
    plan's order.

    :param moves: in the plan's order.
    :param host_of: move -> its destination.
    :param cost_of: move -> its Cost.
    """
    queues = {}
    for position, move in enumerate(moves):
        queues.setdefault(host_of(move), []).append((position, move))

    def rank(entry):
        position, move = entry
        cost = cost_of(move)
        return (-(cost.dirty_rate or 0), -cost.memory, position)

    ordered = []
    while queues:
        host = min(queues, key=lambda h: rank(queues[h][0]))
        ordered.append(queues[host].pop(0)[1])
        if not queues[host]:
            del queues[host]
    return ordered


def predictor(catalog, figures, cost):
    """``prediction(policy name, bandwidth)`` for ``policy_for``: a
    move of ``cost`` predicted (numamig.convergence.predict) under the
    ``catalog``'s policy of that name, with the source's ``figures``
    ({'downtime_ms', 'timeout_s_per_gib', 'timer_tiers'}: the timer
    policy's downtime and what its completion timeout does)."""
    timeout_s = figures['timeout_s_per_gib'] * max(cost.memory / 2 ** 30,
                                                   1)

    def prediction(name, bandwidth):
        return predict.for_policy(
            catalog[name], cost.memory, cost.dirty_rate, bandwidth,
            figures['downtime_ms'], timeout_s,
            tuple(figures['timer_tiers']))
    return prediction


def policy_for(cost, share, own, fallbacks, prediction):
    """The convergence policy a move runs under when it copies with
    ``share`` bytes/s of the link.

    ``own`` unless its prediction (``prediction(policy, share)``, a
    numamig.convergence.predict.Prediction) says pre-copy does not
    converge within it; then the first of ``fallbacks`` predicted to end
    the migration (post-copy, say), else ``own``. An unknown dirty rate
    keeps ``own``: nothing is guessed.
    """
    if cost.dirty_rate is None or not share:
        return own
    if prediction(own, share).outcome == predict.CONVERGES:
        return own
    for other in fallbacks:
        if prediction(other, share).converges:
            return other
    return own
