"""Real tier: the timer-based policy against iteration-aware ones.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_real_convergence.py \
        [--rounds N] [--bandwidth MIB] [--timeout S] [--policies a,b]

Needs root, libvirtd and QEMU; without them it prints one ``SKIP real
tier: <why>`` line and exits 0. Two libvirtd hosts side by side
(numamig_ci.libvirt_hosts), a 128 MiB 1-vCPU pinned TCG guest, each
migration through numamig's libvirt driver exactly as an agent calls it
(``live_migrate``), with the stream capped at ``--bandwidth`` MiB/s. Two
guests:

* busy: the real tier's dirtying kernel rewrites 94 MiB without pause,
  which no pre-copy pass at the cap can send within any downtime a
  policy allows;
* idle: the same guest with no kernel (its memory stays zero): the
  first pass sends it all.

Before each migration the source predicts its outcome from a sampled
dirty rate (``predict_convergence``, as ``migration start --dry-run``
does), and the prediction is printed next to what happened.

Each round migrates each guest once under each policy, in an order that
rotates from round to round so that drift falls on every policy. The
timer policy is numamig's (and Nova's) timer-based behaviour: downtime
raised on a clock, and the completion timeout's abort (``--timeout``).
The iteration-aware ones raise downtime per stalled pass and then apply
their next tier. Per guest and policy it prints the outcomes, the median
total time, the median downtime QEMU measured and the median bytes sent,
then the two targets of issue 19: an iteration-aware policy converges
where the timer one times out (busy), and is never slower than it on the
idle guest (the ratio of medians, with the spread between rounds that
says how much of it is noise).
"""

import argparse
import collections
import dataclasses
import os
import statistics
import sys
import tempfile
import time

from numamig import exception
from numamig import objects
from numamig.conf import CONF
from numamig.convergence import policy as convergence
from numamig.virt.libvirt import driver
from numamig.virt.libvirt import settings as lv_settings
from numamig_ci import libvirt_hosts

GUEST = '5a1e0000-aaaa-4bbb-8ccc-0000000be001'
MIGRATION = '5a1e0000-aaaa-4bbb-8ccc-0000000be002'
MEMORY_MB = 128
MIB = 1024 * 1024
ITERATION_POLICIES = (convergence.NFV, convergence.FINISH)


def placement(pcpu):
    """One guest cell, vCPU 0 pinned to ``pcpu``."""
    cell = objects.InstanceNUMACell(
        id=0, host_cell=0, cpuset=set(), pcpuset={0}, cpu_pinning={0: pcpu},
        memory_mb=MEMORY_MB, cpu_policy='dedicated')
    return objects.InstanceNUMATopology(cells=[cell])


class Hosts:
    """Two libvirtd hosts and a driver per host and policy."""

    def __init__(self, root, timeout_s):
        self.root = root
        self.timeout_s = timeout_s
        self.daemons = {}
        for name in ('src', 'dst'):
            host = libvirt_hosts.LibvirtHost(name, root)
            host.start()
            self.daemons[name] = host
        self.plain = {name: self.driver(name) for name in self.daemons}
        self.kernel = os.path.join(root, 'dirty.bin')
        with open(self.kernel, 'wb') as f:
            f.write(libvirt_hosts.dirtying_kernel())

    def driver(self, name, policy=convergence.TIMER, bandwidth_mib=0):
        daemon = self.daemons[name]
        migration = dataclasses.replace(
            lv_settings.migration_from_conf(CONF.libvirt),
            inbound_addr='127.0.0.1', libvirtd_port=daemon.port,
            progress_interval_s=0.2, policy=policy,
            bandwidth_mib=bandwidth_mib,
            completion_timeout_s=self.timeout_s, timeout_action='abort',
            permit_post_copy=convergence.SHIPPED[policy].uses_post_copy)
        drv = driver.LibvirtDriver(dataclasses.replace(
            lv_settings.LibvirtSettings.from_conf(CONF),
            host=name, uri=daemon.uri, virt_type='qemu',
            cpu_dedicated_set=frozenset({0, 1}), reserved_host_memory_mb=0,
            migration=migration))
        drv.init_host(name)
        return drv

    def spawn(self, busy):
        base_xml = None
        if busy:
            base_xml = ("<domain type='qemu'><os><type arch='x86_64'>hvm"
                        f"</type><kernel>{self.kernel}</kernel></os>"
                        "<devices><memballoon model='none'/></devices>"
                        "</domain>")
        instance = objects.Instance(uuid=GUEST, name='bench-guest', vcpus=1,
                                    memory_mb=MEMORY_MB)
        self.plain['src'].spawn(instance, placement(0), base_xml=base_xml)
        # Let the busy kernel start dirtying before the copy does.
        time.sleep(1)

    def remove_guest(self):
        for drv in self.plain.values():
            if GUEST in drv.list_guests():
                drv.destroy(GUEST)

    def migrate(self, source, policy, bandwidth_mib):
        """Predict, then migrate; the outcome next to the prediction."""
        answer = source.predict_convergence(GUEST,
                                            convergence.SHIPPED[policy])
        predicted = {'predicted': answer['prediction'],
                     'predicted_ms': answer.get('predicted_elapsed_ms')}
        src, dst = self.plain['src'], self.plain['dst']
        info = dst.build_migrate_info(placement(1), dst.get_host_topology())
        dest_xml = src.get_destination_xml(GUEST, info)
        connect_uri, migration_uri = dst.migration_target()
        data = objects.LiveMigrateData(
            instance_uuid=GUEST, source_host='src', dest_host='dst',
            migration_uuid=MIGRATION, dest_connect_uri=connect_uri,
            migration_uri=migration_uri, bandwidth_mib=bandwidth_mib)
        started = time.monotonic()
        try:
            result = source.live_migrate(GUEST, dest_xml, data)
        except exception.NumamigException as exc:
            return dict(predicted, outcome=type(exc).__name__,
                        elapsed_ms=(time.monotonic() - started) * 1000)
        return {**predicted, 'outcome': 'completed',
                'elapsed_ms': result.elapsed_ms,
                'downtime_ms': result.downtime_ms,
                'sent_mib': (result.memory_processed or 0) / MIB,
                'how': 'post-copy' if result.post_copy else
                       'paused' if result.paused else 'pre-copy'}

    def stop(self):
        for drv in list(self.plain.values()):
            drv.cleanup_host()
        for host in self.daemons.values():
            host.stop()


def run(args):
    policies = (convergence.TIMER,) + tuple(args.policies)
    results = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as root:
        hosts = Hosts(root, args.timeout)
        try:
            sources = {p: hosts.driver('src', p, args.bandwidth)
                       for p in policies}
            for rnd in range(args.rounds):
                shift = rnd % len(policies)
                order = policies[shift:] + policies[:shift]
                for busy in (True, False):
                    for name in order:
                        hosts.spawn(busy)
                        try:
                            outcome = hosts.migrate(sources[name], name,
                                                    args.bandwidth)
                        finally:
                            hosts.remove_guest()
                        results['busy' if busy else 'idle', name].append(
                            outcome)
                        print(f"round {rnd + 1} {'busy' if busy else 'idle'}"
                              f" {name:12} {_one(outcome)}", flush=True)
            for drv in sources.values():
                drv.cleanup_host()
        finally:
            hosts.stop()
    return policies, results


def _one(outcome):
    estimate = outcome['predicted_ms']
    line = (f"predicted {outcome['predicted']:17} "
            f"{'' if estimate is None else f'{estimate:.0f} ms':>9}; "
            f"{outcome['outcome']:18} {outcome['elapsed_ms']:8.0f} ms")
    if outcome['outcome'] == 'completed':
        line += (f"  downtime {outcome['downtime_ms'] or 0:6.0f} ms  sent "
                 f"{outcome['sent_mib']:6.1f} MiB  ({outcome['how']})")
    return line


def _median(outcomes, key):
    values = [o[key] for o in outcomes if o.get(key) is not None]
    return statistics.median(values) if values else float('nan')


def report(args, policies, results):
    print(f"\n{args.rounds} rounds, {MEMORY_MB} MiB guest, stream capped "
          f"at {args.bandwidth} MiB/s, timer completion timeout "
          f"{args.timeout:g} s:")
    print(f"{'guest':5} {'policy':12} {'completed':>9} {'median time':>12} "
          f"{'downtime':>9} {'sent':>9}  how")
    for guest in ('busy', 'idle'):
        for name in policies:
            outcomes = results[guest, name]
            done = [o for o in outcomes if o['outcome'] == 'completed']
            hows = collections.Counter(o['how'] for o in done)
            print(f"{guest:5} {name:12} {len(done):4}/{len(outcomes):<4} "
                  f"{_median(outcomes, 'elapsed_ms'):9.0f} ms "
                  f"{_median(done, 'downtime_ms'):6.0f} ms "
                  f"{_median(done, 'sent_mib'):5.1f} MiB  "
                  f"{dict(hows)}")
    print("\nprediction (before each migration, page sampling) against "
          "outcome:")
    for guest in ('busy', 'idle'):
        for name in policies:
            pairs = collections.Counter(
                (o['predicted'], o.get('how', o['outcome']))
                for o in results[guest, name])
            print(f"  {guest:5} {name:12} " + ', '.join(
                f"{p} -> {h} x{n}" for (p, h), n in sorted(pairs.items())))
    timer_busy = results['busy', convergence.TIMER]
    timer_done = sum(o['outcome'] == 'completed' for o in timer_busy)
    others = []
    for name in args.policies:
        busy = results['busy', name]
        done = sum(o['outcome'] == 'completed' for o in busy)
        others.append(f"{name} completed {done}/{len(busy)}")
    print(f"\ntarget 1 (busy guest): timer completed {timer_done}/"
          f"{len(timer_busy)}; {', '.join(others)}")
    timer_idle = [o['elapsed_ms'] for o in results['idle', convergence.TIMER]]
    for name in args.policies:
        mine = [o['elapsed_ms'] for o in results['idle', name]]
        ratio = statistics.median(mine) / statistics.median(timer_idle)
        print(f"target 2 (idle guest): {name} / timer = {ratio:.2f}x "
              f"(medians; {name} {min(mine):.0f}-{max(mine):.0f} ms, "
              f"timer {min(timer_idle):.0f}-{max(timer_idle):.0f} ms)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--bandwidth', type=int, default=64,
                        help='MiB/s cap of the migration stream')
    parser.add_argument('--timeout', type=float, default=30,
                        help="the timer policy's completion timeout (s)")
    parser.add_argument('--policies', default=','.join(ITERATION_POLICIES),
                        help='iteration-aware shipped policies to compare')
    args = parser.parse_args(argv)
    args.policies = tuple(p for p in args.policies.split(',') if p)
    unknown = set(args.policies) - set(convergence.SHIPPED)
    if unknown or convergence.TIMER in args.policies:
        known = sorted(set(convergence.SHIPPED) - {convergence.TIMER})
        parser.error(f"--policies: {', '.join(sorted(unknown)) or 'timer'} "
                     f"is not an iteration-aware shipped policy "
                     f"({', '.join(known)})")
    reason = libvirt_hosts.missing_requirements()
    if reason:
        print(f"SKIP real tier: {reason}")
        return 0
    policies, results = run(args)
    report(args, policies, results)
    return 0


if __name__ == '__main__':
    sys.exit(main())
