"""Side-by-side report of numamig's and Nova's fit on the same cases.

Decisions are compared only where the two mean the same thing. Cases
fall in one of three groups, each counted on its own line:

- same semantics: agreement here is what the comparison is about;
- intended difference: the isolate thread policy on a host with SMT.
  numamig gives each vCPU a whole free core (issue 3); Nova refuses it on
  a host whose dedicated and shared sets differ (hardware.py
  _pack_instance_onto_cores, bug #1889633), whatever is free;
- Nova flawed: Nova returned a placement nova_fit.flaw() rejects (a
  pinned guest cell without pins), so its "fits" is not a decision.

Speed ratios are over every case Nova ran: the time to decide is
comparable even where the decisions differ.
"""

import statistics

SAME, ISOLATE_SMT, NOVA_FLAWED = 'same', 'isolate-smt', 'nova-flawed'


def semantics(host, request):
    """Return SAME or ISOLATE_SMT for a case."""
    isolate = any(cell.cpu_thread_policy == 'isolate' and cell.pcpuset
                  for cell in request.cells)
    smt = any(len(group) > 1 for cell in host.cells
              for group in cell.siblings)
    return ISOLATE_SMT if isolate and smt else SAME


def stats(values):
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered), p99, ordered[-1]


def timing_line(label, times):
    median, p99, worst = stats(times)
    return (f"{label:<22} median {median:8.1f} us p99 {p99:8.1f} max "
            f"{worst:8.1f}")


def speed(ours, nova, mode):
    """Return (Nova's median us, median speed-up of ``mode``) over the
    cases Nova ran; ``ours`` holds bench_fit.time_case's results."""
    ran = [(o, n) for o, n in zip(ours, nova, strict=True)
           if n['fits'] is not None]
    if not ran:
        return None, None
    return (statistics.median(n['us'] for _, n in ran),
            statistics.median(n['us'] / o['us'][mode] for o, n in ran))


def groups(kinds, ours, nova):
    """Return {group: [(index, numamig fits, nova result)]}."""
    result = {SAME: [], ISOLATE_SMT: [], NOVA_FLAWED: []}
    for index, (kind, mine, theirs) in enumerate(
            zip(kinds, ours, nova, strict=True)):
        if theirs['fits'] is None:
            continue
        fits = mine['fits']
        group = NOVA_FLAWED if theirs.get('flaw') else kind
        result[group].append((index, fits, theirs))
    return result


def decision_lines(labels, kinds, ours, nova):
    """Return the report lines about decisions, one per group."""
    found = groups(kinds, ours, nova)
    same = found[SAME]
    agree = sum(fits == theirs['fits'] for _, fits, theirs in same)
    lines = [f"  same semantics: decisions agree {agree}/{len(same)}"]
    lines += [f"    DISAGREE {labels[i]}: numamig "
              f"{'fits' if fits else 'does not fit'}, Nova "
              f"{'fits' if theirs['fits'] else 'does not fit'}"
              for i, fits, theirs in same if fits != theirs['fits']]
    iso = found[ISOLATE_SMT]
    if iso:
        ours_only = sum(fits and not t['fits'] for _, fits, t in iso)
        nova_only = sum(t['fits'] and not fits for _, fits, t in iso)
        lines.append(
            f"  intended difference, isolate on SMT hosts: {len(iso)} "
            f"cases, {len(iso) - ours_only - nova_only} agree, "
            f"{ours_only} fit only in numamig (whole cores), "
            f"{nova_only} fit only in Nova")
    for index, fits, theirs in found[NOVA_FLAWED]:
        lines.append(f"  Nova flawed placement on {labels[index]} (numamig "
                     f"{'fits' if fits else 'does not fit'}): "
                     f"{theirs['flaw']}")
    return lines
