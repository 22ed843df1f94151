"""The intended differences between numamig's fit and Nova's.

A disagreement found by fuzz_fit.py belongs to a family when its
predicate says so; doc/source/numa-fit.rst ("Comparing with Nova") lists
the same families with their reasons, and tests/unit/numa/
test_nova_differences.py pins numamig's side of each. A disagreement no
family claims is a finding. Predicates read the case (plain JSON), both
answers and what differs (fuzz_fit.outcome), and are kept narrow: each
names the spec or the refusal text that makes the difference.
"""

import itertools
import json

from numamig import exception
from numamig.numa import specs

ONLY_NUMAMIG_REFUSES = 'only numamig refuses the specs'
ONLY_NOVA_REFUSES = 'only Nova refuses the specs'
ONLY_NUMAMIG_FITS = 'only numamig fits'
ONLY_NOVA_FITS = 'only Nova fits'
REQUESTS_DIFFER = 'the requests differ'


def _specs(case):
    return case['request']['extra_specs'], case['request']['image_properties']


def _cells(answer):
    return (answer.get('request') or {}).get('cells', ())


def _refusal(mine, what, *fragments):
    return what == ONLY_NUMAMIG_REFUSES and any(
        fragment in mine['text'] for fragment in fragments)


def _image_repeats_flavor(case, mine, theirs, what):
    """Nova forbids an image property that repeats the flavor's key
    (hw_numa_nodes, hw_numa_cpus.N / hw_numa_mem.N, hw_mem_page_size
    unless the flavor says large or any); numamig accepts the same value,
    as it changes nothing."""
    if what != ONLY_NOVA_REFUSES or theirs['error'] not in (
            'ImageNUMATopologyForbidden', 'MemoryPageSizeForbidden'):
        return False
    flavor, image = _specs(case)
    return any(_same(key[3:], flavor.get('hw:' + key[3:]), value)
               for key, value in image.items())


def _same(name, flavor_value, image_value):
    """Whether the image's value says what the flavor's does."""
    if name != 'mem_page_size' or flavor_value is None:
        return flavor_value == image_value
    try:
        return (specs.parse_page_size(name, flavor_value)
                == specs.parse_page_size(name, image_value))
    except exception.InvalidNUMARequest:
        return False


def _both_masks(case, mine, theirs, what):
    """Nova refuses hw:cpu_policy=mixed with both a dedicated and a
    realtime mask; numamig pins the dedicated mask's vCPUs and requires
    the realtime ones among them."""
    flavor, image = _specs(case)
    masks = 'hw:cpu_dedicated_mask' in flavor and (
        'hw:cpu_realtime_mask' in flavor or 'hw_cpu_realtime_mask' in image)
    return (what == ONLY_NOVA_REFUSES and masks
            and theirs['error'] == 'RequiredMixedOrRealtimeCPUMask')


def _image_contradicts(case, mine, theirs, what):
    """numamig refuses an image property that contradicts the flavor
    (ImageSpecForbidden); Nova silently keeps one side: the flavor's
    policy, or under hw:mem_page_size=large any image size, small
    included."""
    return (what == ONLY_NUMAMIG_REFUSES
            and mine['error'] == 'ImageSpecForbidden')


def _mask_without_realtime(case, mine, theirs, what):
    """numamig refuses a realtime mask without hw:cpu_realtime=yes;
    Nova ignores the mask, and the guest gets no realtime vCPU."""
    return _refusal(mine, what, "a realtime mask needs hw:cpu_realtime")


def _realtime_needs_mask(case, mine, theirs, what):
    """numamig asks for the realtime mask, and for isolated emulator
    threads when it names every vCPU; Nova makes every vCPU realtime
    without a mask, given any hw:emulator_threads_policy (share too)."""
    return _refusal(mine, what, "realtime needs hw:cpu_realtime_mask",
                    "every vCPU would be realtime")


def _refused_up_front(case, mine, theirs, what):
    """numamig refuses a page size that is not a power of two, or guest
    cell memory that is not a whole number of pages, when it reads the
    specs; Nova reads them and then fits the guest on no host."""
    return _refusal(mine, what, "is not a power of two",
                    "not a multiple of the") and theirs.get('fits') is False


def _image_emulator_policy(case, mine, theirs, what):
    """numamig reads hw_emulator_threads_policy from the image when the
    flavor leaves it unset; Nova has no such image property."""
    flavor, image = _specs(case)
    from_image = ('hw_emulator_threads_policy' in image
                  and 'hw:emulator_threads_policy' not in flavor)
    if not from_image:
        return False
    if what != REQUESTS_DIFFER:
        return what in (ONLY_NUMAMIG_FITS, ONLY_NOVA_FITS)
    return _differing(mine, theirs) == {'emulator_threads_policy'}


def _image_narrows_prefer(case, mine, theirs, what):
    """Under hw:cpu_thread_policy=prefer numamig lets the image choose
    the thread policy (the flavor allows it); Nova keeps prefer."""
    flavor, image = _specs(case)
    return (what == REQUESTS_DIFFER
            and flavor.get('hw:cpu_thread_policy') == 'prefer'
            and 'hw_cpu_thread_policy' in image
            and _differing(mine, theirs) == {'cpu_thread_policy'})


def comparable(request):
    """Nova's request (nova_oracle.plain_request) in the terms of
    numamig's (fuzz_fit.plain_request): only isolated emulator threads
    count, and a thread policy only on cells that pin vCPUs (Nova writes
    both on every guest)."""
    if request is None:
        return None
    isolate = request['emulator_threads_policy'] == 'isolate'
    return {'emulator_threads_policy': 'isolate' if isolate else None,
            'cells': [dict(cell, cpu_thread_policy=(
                cell['cpu_thread_policy'] if cell['pcpuset'] else None))
                for cell in request['cells']]}


def _differing(mine, theirs):
    """The request fields that differ."""
    ours_, nova = mine['request'], comparable(theirs['request'])
    keys = {key for key in ('emulator_threads_policy',)
            if ours_[key] != nova[key]}
    for a, b in zip(ours_['cells'], nova['cells'], strict=False):
        keys |= {key for key in a if a[key] != b[key]}
    return keys


def _isolate_smt(case, guest, host, why):
    """numamig gives each isolated vCPU a whole free core; Nova refuses
    isolate on an SMT host cell whose dedicated and shared sets differ
    (bug #1889633)."""
    return (guest['cpu_thread_policy'] == 'isolate' and bool(host['siblings'])
            and host['shared'] != host['dedicated'])


def _require_whole_cores(case, guest, host, why):
    """numamig's require pins onto whole free SMT cores (every thread,
    shared ones too, free and dedicated), so no other guest's vCPU nor
    the shared set runs on a sibling; Nova takes any core with two free
    dedicated threads."""
    return why is not None and "for require" in why


def _nothing_to_pin(case, guest, host, why):
    """Nova refuses a guest cell of a mixed guest that pins no vCPU
    under the isolate thread policy, and isolated emulator threads when
    guest cell 0 pins no vCPU (its packing needs a pin to reserve next
    to); numamig places such a cell by its floating vCPUs and memory, and
    the emulator pCPU on guest cell 0's host cell all the same."""
    flavor, image = _specs(case)
    isolate = 'isolate' in (flavor.get('hw:cpu_thread_policy'),
                            image.get('hw_cpu_thread_policy'))
    emulator = 'isolate' in (flavor.get('hw:emulator_threads_policy'),
                             image.get('hw_emulator_threads_policy'))
    return (guest['cpu_policy'] == 'mixed' and not guest['pcpuset']
            and (isolate or emulator))


def _no_floating_no_load(case, guest, host, why):
    """A guest cell that floats no vCPU adds nothing to the shared set;
    Nova still counts a mixed one against cpu_allocation_ratio, so a
    shared set already used beyond the ratio (or a cell without one
    that reports usage) refuses it."""
    ratio = (case['limits'] or {}).get('cpu_allocation_ratio')
    return (ratio is not None and not guest['cpuset']
            and host['cpu_usage'] > len(host['shared']) * ratio)


def _small_pages_kept(case, guest, host, why):
    """numamig keeps a guest without a page size out of the memory that
    huge pages, small-page guests and reserved pages hold (the small
    pool's budget); Nova checks it against the small pool's total only,
    and with limits against the cell's memory."""
    return why is not None and "of small pages" in why


def _paged_guest_ratio(case, guest, host, why):
    """A guest cell with a page size needs free pages; Nova also counts
    a shared or mixed one against ram_allocation_ratio x the cell's
    memory, which only refuses it where other guests' memory is already
    beyond the ratio (limits lowered after they were placed)."""
    ratio = (case['limits'] or {}).get('ram_allocation_ratio')
    return (ratio is not None and guest['pagesize'] is not None
            and host['memory_usage_mb'] + guest['memory_mb']
            > host['memory_mb'] * ratio)


FAMILIES = (
    ('image may repeat the flavor', _image_repeats_flavor),
    ('mixed with both masks', _both_masks),
    ('image contradicting the flavor refused', _image_contradicts),
    ('realtime mask without realtime refused', _mask_without_realtime),
    ('realtime needs a mask', _realtime_needs_mask),
    ('impossible page size refused up front', _refused_up_front),
    ('emulator threads policy from the image', _image_emulator_policy),
    ('image narrows prefer', _image_narrows_prefer),
)

# Fit decisions: (name, direction, pair predicate). A case belongs here
# when its decisions differ the family's way and each (guest cell, host
# cell) pair the engines judge apart (fuzz_fit.pair_verdicts) is one a
# predicate explains: pair(case, guest cell, host cell, numamig's reason
# or None where only numamig admits the pair).
PAIR_FAMILIES = (
    ('isolate on SMT hosts', ONLY_NUMAMIG_FITS, _isolate_smt),
    ('a guest cell with nothing to pin', ONLY_NUMAMIG_FITS,
     _nothing_to_pin),
    ('no floating vCPU, no shared load', ONLY_NUMAMIG_FITS,
     _no_floating_no_load),
    ('paged guests and ram_allocation_ratio', ONLY_NUMAMIG_FITS,
     _paged_guest_ratio),
    ('require takes whole cores', ONLY_NOVA_FITS, _require_whole_cores),
    ('small pages kept apart', ONLY_NOVA_FITS, _small_pages_kept),
)


def _devices_alone(case, mine, theirs, what):
    """A guest asking devices and nothing else: Nova gives it no guest
    node and applies no policy; numamig gives it one. Claimed only where
    Nova, asked the same guest with hw:numa_nodes=1, answers as numamig
    does."""
    return what == ONLY_NOVA_FITS and 'devices_alone' in theirs and \
        theirs['one_node'].get('fits') == mine['fits']


def _pf_with_own_vfs(case, mine, theirs, what):
    """Nova's scheduler check counts a PF and VFs of that same PF as if
    both could be given (its claim finds out later); numamig refuses at
    once. Claimed only where the guest asks a PF and, on some set of host
    cells its cells fit, every requested device gets a free function of
    its kind that its policy allows once that exclusion is ignored (a
    bipartite matching, written here from the policies' definitions)."""
    if what != ONLY_NOVA_FITS or 'pci' not in case or 'table' not in theirs:
        return False
    slots = _device_slots(case)
    if not any(alias.get('device_type') == 'type-PF' for alias, _ in slots):
        return False
    table = theirs['table']
    hosts = len(case['host']['cells'])
    for chosen in itertools.combinations(range(hosts), len(table)):
        if not _matched([[p for p in row if p in chosen] for row in table],
                        hosts):
            continue
        if _matched(_slot_rows(case, slots, set(chosen)),
                    len(case['pci']['devices'])):
            return True
    return False


def _device_slots(case):
    """(alias entry, policy) per requested device."""
    extra, image = _specs(case)
    guest = (extra.get('hw:pci_numa_affinity_policy')
             or image.get('hw_pci_numa_affinity_policy'))
    aliases = {}
    for text in case['pci']['aliases']:
        entry = json.loads(text)
        aliases[entry['name']] = entry
    slots = []
    for part in extra['pci_passthrough:alias'].split(','):
        name, _, count = part.partition(':')
        alias = aliases[name.strip()]
        policy = guest or alias.get('numa_policy') or 'legacy'
        slots += [(alias, policy)] * int(count or 1)
    return slots


def _slot_rows(case, slots, nodes):
    """Per slot, the positions of the free functions it may take."""
    devices = case['pci']['devices']
    used = {d['address'] for d in devices if d['used']}
    busy = set(used)
    for device in devices:
        if device['parent_addr'] in used or (
                device['address'] in used and device['parent_addr']):
            busy.update((device['address'], device['parent_addr']))
    busy.discard(None)
    sockets = case['pci']['sockets']
    known = None not in sockets
    near = {sockets[n] for n in nodes} if known else set()
    rows = []
    for alias, policy in slots:
        row = []
        for position, device in enumerate(devices):
            wanted = alias.get('device_type')
            if device['address'] in busy or \
                    device['product_id'] != alias['product_id'] or \
                    (device['dev_type'] != wanted if wanted else
                     device['dev_type'] == 'type-PF'):
                continue
            node = device['numa_node']
            if policy == 'required':
                ok = node in nodes
            elif policy == 'legacy':
                ok = node is None or node in nodes
            elif policy == 'socket':
                ok = node in nodes or (node is not None and
                                       sockets[node] in near)
            else:
                ok = True
            if ok:
                row.append(position)
        rows.append(row)
    return rows


def _matched(rows, columns):
    """Whether every row gets a distinct column of its own (augmenting
    paths)."""
    owner = [None] * columns

    def place(row, seen):
        for column in rows[row]:
            if column not in seen:
                seen.add(column)
                if owner[column] is None or place(owner[column], seen):
                    owner[column] = row
                    return True
        return False

    return all(place(row, set()) for row in range(len(rows)))


def _pfs_counted_then_dropped(case, mine, theirs, what):
    """Nova filters pools by the guest's nodes, and stops there when they
    hold enough, before it drops the PFs no request asked for: a PF on
    the guest's node hides a VF or function elsewhere that the policy
    (legacy, preferred, socket) would allow, and Nova refuses. Claimed
    only where Nova's own check on the host without its PFs fits."""
    return what == ONLY_NUMAMIG_FITS and \
        theirs.get('fits_without_pfs') is True


def one_node_case(case):
    """The case with hw:numa_nodes=1 added: what nova_oracle.py asks Nova
    again for a guest asking devices and nothing else."""
    request = case['request']
    return dict(case, request=dict(request, extra_specs=dict(
        request['extra_specs'], **{'hw:numa_nodes': '1'})))


DEVICE_FAMILIES = (
    ('devices alone get one guest node', _devices_alone),
    ('a PF and its own VFs', _pf_with_own_vfs),
    ('PFs counted before they are dropped', _pfs_counted_then_dropped),
)


def family(case, mine, theirs, what):
    """Return the name of the intended difference, or None.

    Fit decisions name every family their pairs need, joined by ' + '.
    """
    for name, matches in FAMILIES + DEVICE_FAMILIES:
        if matches(case, mine, theirs, what):
            return name
    pairs = theirs.get('pairs')
    if not pairs:
        return None
    guests, hosts = _cells(mine), case['host']['cells']
    names = set()
    for pair in pairs:
        name = _pair_family(case, guests[pair['guest']],
                            hosts[pair['host']], pair['numamig'], what)
        if name is None:
            return None
        names.add(name)
    return ' + '.join(sorted(names))


def _pair_family(case, guest, host, why, what):
    for name, direction, matches in PAIR_FAMILIES:
        if direction == what and matches(case, guest, host, why):
            return name
    return None
