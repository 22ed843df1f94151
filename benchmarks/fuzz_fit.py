"""Differential fuzzer: numamig's NUMA fit against Nova's rules.

    .venv/bin/python benchmarks/fuzz_fit.py --nova-python NOVA_PYTHON
        [--cases 20000] [--seed 16] [--show 3] [--save FAILURES.jsonl]

Draws random cases (fuzz_cases.py: hosts of 1-16 cells, guests over
every flavor extra spec and image property numamig reads), asks both
engines, and checks numamig's placements against the rules from scratch
(fuzz_rules.py). Nova answers in its own virtualenv (nova_oracle.py:
Nova's spec parsing and per-cell rule, guest cells matched to distinct
host cells); build one with ``python3 -m venv /work/novaenv &&
/work/novaenv/bin/pip install nova``. Without --nova-python only the
rule check runs.

Each case ends in one group: the engines agree (both refuse the specs,
both ask no NUMA fit, both fit, neither fits), they disagree in a way
doc/source/numa-fit.rst lists as intended (fuzz_families.py says which
and why), or they disagree otherwise: a finding, printed with the case.
A placement that breaks a rule is always a finding. Exit code 1 when
there is a finding.
"""

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile

import fuzz_cases  # noqa: E402  (benchmarks/, next to this script)
import fuzz_families  # noqa: E402
import fuzz_rules  # noqa: E402

from numamig import exception
from numamig import objects
from numamig.numa import cellfit
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import pci
from numamig.numa import views

HERE = os.path.dirname(os.path.abspath(__file__))


def numamig_host(data, pci_data=None):
    """The HostNUMATopology of a case's host; with ``pci_data`` (a device
    case's ``pci``) its functions, those in use held by a guest, and its
    cells' sockets."""
    sockets = (pci_data['sockets'] if pci_data
               else [None] * len(data['cells']))
    devices = [objects.HostPCIDevice(
        address=d['address'], vendor_id=d['vendor_id'],
        product_id=d['product_id'], dev_type=d['dev_type'],
        parent_addr=d['parent_addr'], numa_node=d['numa_node'],
        instance_uuid=USED if d['used'] else None)
        for d in (pci_data['devices'] if pci_data else ())]
    cells = [objects.HostNUMACell(
        id=cell['id'], cpuset=set(cell['shared']), socket=socket,
        pcpuset=set(cell['dedicated']), pinned_cpus=set(cell['pinned']),
        siblings=[set(group) for group in cell['siblings']],
        memory_mb=cell['memory_mb'],
        memory_usage_mb=cell['memory_usage_mb'],
        cpu_usage=cell['cpu_usage'],
        mempages=[objects.NUMAPagesTopology(**pool)
                  for pool in cell['pools']])
        for cell, socket in zip(data['cells'], sockets, strict=True)]
    return objects.HostNUMATopology(cells=cells, pci_devices=devices)


# The guest holding a device case's used functions.
USED = '00000000-0000-4000-8000-000000000001'


def plain_request(request):
    """The request in nova_oracle.plain_request's terms. A thread policy
    counts on cells that pin vCPUs only (Nova writes it on every cell)."""
    if request is None:
        return None
    isolate = request.emulator_threads_policy == 'isolate'
    return {'emulator_threads_policy': 'isolate' if isolate else None,
            'cells': [{'pcpuset': sorted(cell.pcpuset),
                       'cpuset': sorted(cell.cpuset),
                       'memory_mb': cell.memory_mb,
                       'pagesize': cell.pagesize,
                       'cpu_policy': cell.cpu_policy,
                       'cpu_thread_policy': (cell.cpu_thread_policy
                                             if cell.pcpuset else None)}
                      for cell in request.cells]}


def ours(case):
    """numamig's answer: the error, or the request, the decision, the
    refusal's reason and what the placement breaks."""
    guest = case['request']
    pci_data = case.get('pci')
    try:
        aliases = pci.parse_aliases(pci_data['aliases']) if pci_data \
            else None
        request = constraints.get_numa_request(
            guest['vcpus'], guest['memory_mb'], guest['extra_specs'],
            guest['image_properties'], aliases)
    except exception.InvalidNUMARequest as exc:
        return {'error': type(exc).__name__, 'text': str(exc)}
    answer = {'request': plain_request(request), 'realtime': sorted(
        set().union(*(c.realtime_vcpus for c in request.cells))
        if request else ())}
    if request is None:
        return answer
    limits = case['limits'] and objects.NUMALimits(**case['limits'])
    result = fit.fit(numamig_host(case['host'], pci_data), request, limits)
    answer['fits'] = result.fits
    if result.fits:
        answer['flaws'] = fuzz_rules.flaws(case['host'], request,
                                           result.topology, case['limits'])
    else:
        answer['reason'] = result.reason
    return answer


def pair_verdicts(case, theirs):
    """The (guest cell, host cell) pairs the engines judge apart, as
    {'guest': index, 'host': position, 'numamig': numamig's reason, None
    where only numamig admits the pair}. Read when decisions differ, so
    that a family can say which rule makes every such pair."""
    guest = case['request']
    pci_data = case.get('pci')
    wanted = views.RequestView(constraints.get_numa_request(
        guest['vcpus'], guest['memory_mb'], guest['extra_specs'],
        guest['image_properties'],
        pci.parse_aliases(pci_data['aliases']) if pci_data else None))
    hosts = views.HostView(numamig_host(case['host'])).cells
    limits = case['limits'] and views.LimitsView(
        objects.NUMALimits(**case['limits']))
    found = []
    for index, (demand, row) in enumerate(
            zip(wanted.demands(), theirs['table'], strict=True)):
        for position, host_cell in enumerate(hosts):
            why, _ = cellfit.check(host_cell, demand, limits)
            if (why is None) != (position in row):
                found.append({'guest': index, 'host': position,
                              'numamig': why and cellfit.explain(why)})
    return found


def run_nova(python, cases):
    with tempfile.NamedTemporaryFile('w', suffix='.jsonl') as handle:
        for case in cases:
            handle.write(json.dumps(case) + '\n')
        handle.flush()
        output = subprocess.run(
            [python, os.path.join(HERE, 'nova_oracle.py'), handle.name],
            check=True, capture_output=True, text=True,
            cwd=tempfile.gettempdir())
    return [json.loads(line) for line in output.stdout.splitlines()]


def outcome(mine, theirs):
    """Return (kind, what) for one case: kind is 'agree' or 'differ'."""
    if mine.get('flaws'):
        return 'differ', 'numamig placement breaks a rule'
    if theirs is None:
        return 'agree', 'rules hold (no Nova)'
    if 'error' in mine and 'error' in theirs:
        return 'agree', 'both refuse the specs'
    if 'error' in mine or 'error' in theirs:
        side = 'numamig' if 'error' in mine else 'Nova'
        return 'differ', f"only {side} refuses the specs"
    if 'devices_alone' in theirs:
        return _devices_alone(mine, theirs)
    if mine['request'] != fuzz_families.comparable(theirs['request']):
        return 'differ', 'the requests differ'
    if mine['realtime'] != theirs['realtime']:
        return 'differ', 'the realtime vCPUs differ'
    if mine['request'] is None:
        return 'agree', 'both ask no NUMA fit'
    if mine['fits'] != theirs['fits']:
        side = 'numamig' if mine['fits'] else 'Nova'
        return 'differ', f"only {side} fits"
    return 'agree', 'both fit' if mine['fits'] else 'neither fits'


def _devices_alone(mine, theirs):
    """A guest asking devices and nothing else: Nova gives it no guest
    NUMA topology and checks its devices against the whole host, no
    policy applied; numamig gives it one guest node, so its policy holds.
    numamig may refuse where Nova fits (a family decides), never fit
    where Nova refuses."""
    cells = (mine['request'] or {}).get('cells') or []
    if len(cells) != 1:
        return 'differ', 'the requests differ'
    if mine['fits'] == theirs['devices_alone']:
        return 'agree', ('both fit (Nova: no guest node)' if mine['fits']
                         else 'neither fits (Nova: no guest node)')
    side = 'numamig' if mine['fits'] else 'Nova'
    return 'differ', f"only {side} fits"


def _one_node_family(case, mine, theirs, what):
    """A guest asking devices alone whose decision differs from Nova's for
    the same guest given one guest node: the family of that one-node
    case, joined to 'devices alone get one guest node'."""
    one, nova = fuzz_families.one_node_case(case), theirs['one_node']
    inner = outcome(mine, nova)
    if inner[0] != 'differ' or inner[1] != what:
        return None
    if 'table' in nova:
        nova = dict(nova, pairs=pair_verdicts(one, nova))
    family = fuzz_families.family(one, mine, nova, what)
    return family and f"devices alone get one guest node + {family}"


def tally(cases, mine, theirs, groups=None):
    """Return (counts, findings, search) over all cases.

    counts: {(group, what): n}, group 'agree', 'intended: <family>' or
    'finding'; findings: [(what, case, mine, theirs)]; search: how
    often Nova's own permutation search agreed with the oracle.
    ``groups``, a list, gets each case's (group, what).
    """
    counts, findings = collections.Counter(), []
    search = collections.Counter()
    for case, ours_, nova in zip(cases, mine, theirs, strict=True):
        kind, what = outcome(ours_, nova)
        if kind == 'differ':
            if what.endswith(' fits') and 'table' in nova:
                nova = dict(nova, pairs=pair_verdicts(case, nova))
            family = fuzz_families.family(case, ours_, nova, what)
            if family is None and 'devices_alone' in nova:
                family = _one_node_family(case, ours_, nova, what)
            if family is None:
                findings.append((what, case, ours_, nova))
                group = 'finding'
            else:
                group = f"intended: {family}"
        else:
            group = 'agree'
        counts[group, what] += 1
        if groups is not None:
            groups.append((group, what))
        if nova and nova.get('search_fits') is not None:
            search[nova['search_fits'] == nova['fits']] += 1
    return counts, findings, search


def documents(case):
    """The case as HOST.json and REQUEST.json documents
    (doc/source/numa-fit.rst), the form ``numamig-manage numa fit`` and
    tests/unit/numa/test_nova_cases.py read."""
    pci_data = case.get('pci') or {}
    sockets = pci_data.get('sockets') or [None] * len(case['host']['cells'])
    cells = []
    for cell, socket in zip(case['host']['cells'], sockets, strict=True):
        doc = {'id': cell['id'],
               'cpus': sorted(cell['shared'] + cell['dedicated']),
               'dedicated': cell['dedicated'], 'shared': cell['shared'],
               'siblings': cell['siblings'], 'memory_mb': cell['memory_mb'],
               'memory_usage_mb': cell['memory_usage_mb'],
               'pinned': cell['pinned'], 'cpu_usage': cell['cpu_usage'],
               'pages': cell['pools']}
        if socket is not None:
            doc['socket'] = socket
        cells.append(doc)
    host = {'cells': cells}
    request = dict(case['request'], limits=case['limits'])
    if pci_data:
        host['pci_devices'] = [
            dict({key: value for key, value in device.items()
                  if key != 'used'},
                 instance_uuid=USED if device['used'] else None)
            for device in pci_data['devices']]
        request['pci_aliases'] = [json.loads(text)
                                  for text in pci_data['aliases']]
    return host, request


def nova_decision(theirs):
    """Nova's answer as the recorded device cases keep it: 'error', or
    whether the guest fits (with no guest node where it asks devices and
    nothing else), None where it asks no NUMA fit."""
    if 'error' in theirs:
        return 'error'
    if 'devices_alone' in theirs:
        return theirs['devices_alone']
    return theirs.get('fits')


def record(path, cases, theirs, groups, per_group):
    """Write up to ``per_group`` cases of each (group, what) as JSON, with
    Nova's decision (nova_decision)."""
    taken = collections.Counter()
    kept = []
    for index, (case, nova, (group, what)) in enumerate(
            zip(cases, theirs, groups, strict=True)):
        if group == 'finding' or taken[group, what] >= per_group:
            continue
        taken[group, what] += 1
        host, request = documents(case)
        kept.append({'name': f"{group}: {what} #{index}", 'group': group,
                     'what': what, 'host': host, 'request': request,
                     'nova': nova_decision(nova)})
    with open(path, 'w') as handle:
        json.dump(kept, handle, indent=1, sort_keys=True)
        handle.write('\n')


def report(counts, findings, search, show):
    total = sum(counts.values())
    agreed = sum(n for (group, _), n in counts.items() if group == 'agree')
    print(f"cases: {total}, agree: {agreed}, differ: {total - agreed}")
    for (group, what), count in sorted(counts.items()):
        print(f"  {group:<45} {what:<36} {count:6d}")
    if search:
        print(f"Nova's own search vs the per-cell oracle: {search[True]} "
              f"agree, {search[False]} differ (its verdict cache, "
              f"numa-fit.rst)")
    shown = collections.Counter()
    for what, case, mine, theirs in findings:
        if shown[what] < show:
            shown[what] += 1
            print(f"FINDING {what}: {json.dumps(case)}\n  numamig: "
                  f"{json.dumps(mine)}\n  nova: {json.dumps(theirs)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--cases', type=int, default=20000)
    parser.add_argument('--seed', type=int, default=16)
    parser.add_argument('--nova-python',
                        help="Python of a virtualenv with nova installed.")
    parser.add_argument('--devices', action='store_true',
                        help="Guests asking PCI devices by alias on hosts "
                             "of 1-4 cells with PFs, VFs and plain "
                             "functions (fuzz_cases.random_device_case).")
    parser.add_argument('--show', type=int, default=3,
                        help="Findings printed per kind.")
    parser.add_argument('--save', help="Write the findings' cases here, "
                                       "one JSON line each.")
    parser.add_argument('--record',
                        help="Write up to --per-group cases of each group "
                             "(findings left out) here as HOST.json and "
                             "REQUEST.json documents with Nova's decision "
                             "(tests/unit/numa/data/).")
    parser.add_argument('--per-group', type=int, default=12)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    draw = (fuzz_cases.random_device_case if args.devices
            else fuzz_cases.random_case)
    cases = [draw(rng) for _ in range(args.cases)]
    mine = [ours(case) for case in cases]
    theirs = (run_nova(args.nova_python, cases) if args.nova_python
              else [None] * len(cases))
    groups = []
    counts, findings, search = tally(cases, mine, theirs, groups)
    if args.record:
        if not args.nova_python:
            parser.error("--record needs --nova-python")
        record(args.record, cases, theirs, groups, args.per_group)
    report(counts, findings, search, args.show)
    if args.save:
        with open(args.save, 'w') as handle:
            for what, case, ours_, nova in findings:
                handle.write(json.dumps({'what': what, 'case': case,
                                         'numamig': ours_, 'nova': nova})
                             + '\n')
    return 1 if findings else 0


if __name__ == '__main__':
    sys.exit(main())
