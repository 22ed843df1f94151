"""numamig-manage numa: offline NUMA engine actions (no service needed).

The action reads files and prints; parsing, fitting and formatting live
in numamig.numa (doc/source/numa-fit.rst documents the JSON formats).
"""

import json
import time

from numamig import exception
from numamig.cmd import common
from numamig.convergence import policy as convergence
from numamig.numa import fit as fit_mod
from numamig.numa import hostjson

# Issue 3 fixes 2 as the bad-input code of this action (scripts written
# against it test for 2), unlike the CLI-wide EXIT_BAD_INPUT.
EXIT_FIT_BAD_INPUT = 2

_BAD_INPUT = (exception.Invalid, ValueError, OSError, RecursionError)


class NumaCommands:
    """Offline NUMA placement: dry runs without any service."""

    @common.args('--host-topology', metavar='HOST.json',
                 help="Host topology file (cells, CPUs, usage, pages).")
    @common.args('--request', metavar='REQUEST.json',
                 help="Guest request file (vcpus, memory_mb, extra_specs, "
                      "image_properties, limits).")
    @common.args('--strategy', default='spread',
                 help="Host cell order: emptiest first (spread, default) "
                      "or fullest first (pack).")
    @common.args('--batch', metavar='FILE.jsonl',
                 help="Fit many cases: one {\"name\", \"host\", \"request\"} "
                      "object per line; prints one result line per case "
                      "with the in-process fit time (elapsed_us).")
    def fit(self, host_topology=None, request=None, strategy='spread',
            batch=None):
        """Fit a guest request onto a host topology and print the result.

        Prints the placement as JSON. With --batch, one result line per
        input line. Exit codes (specific to this action): 0 it fits (every
        case fits), 1 it does not fit (some case does not), 2 bad input
        (unreadable file, malformed JSON, invalid specs); nothing changes.
        """
        if strategy not in fit_mod.STRATEGIES:
            return _bad_input(f"--strategy {strategy!r}: must be one of "
                              f"{', '.join(fit_mod.STRATEGIES)}")
        if batch is not None:
            if host_topology or request:
                return _bad_input("give either --batch or --host-topology "
                                  "with --request, not both")
            return _fit_batch(batch, strategy)
        if not (host_topology and request):
            return _bad_input("--host-topology and --request are required "
                              "(or --batch)")
        try:
            host = _load(host_topology)
            req = _load(request)
            outcome, _ = _fit_case(host, req, strategy)
        except _BAD_INPUT as exc:
            return _bad_input(exc)
        print(json.dumps(outcome, indent=2, sort_keys=True))
        return common.EXIT_OK if outcome['fits'] else common.EXIT_NO


def _bad_input(problem):
    # fit answers in JSON only: so does its error.
    return common.fail(problem, EXIT_FIT_BAD_INPUT, 'json')


def _load(path):
    with open(path, encoding='utf-8') as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON: {exc}")
        except RecursionError:
            raise ValueError(f"{path}: JSON nested too deeply")


def _fit_case(host_data, request_data, strategy):
    """Return (output document, microseconds the fit took)."""
    from numamig.conf import CONF
    host = hostjson.host_from_json(host_data)
    request, limits, pagesize = hostjson.request_from_json(
        request_data, foreign_specs=CONF.foreign_numa_specs,
        policies=convergence.catalog(
            CONF.libvirt.live_migration_policies))
    if request is None:
        return {'fits': True, 'cells': [],
                'note': "the guest asks for no NUMA characteristic, so any "
                        "host with room fits it"}, 0.0
    start = time.perf_counter()
    result = fit_mod.fit(host, request, limits=limits, strategy=strategy,
                         pagesize_kb=pagesize)
    # The result works out its placement or reason when read: read it
    # here, so that the time covers everything the output shows.
    _ = result.topology if result.fits else result.reason
    elapsed = (time.perf_counter() - start) * 1e6
    return hostjson.result_to_json(result), elapsed


def _fit_batch(path, strategy):
    try:
        handle = open(path, encoding='utf-8')
    except OSError as exc:
        return _bad_input(exc)
    worst = common.EXIT_OK
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            output, code = _batch_line(line, number, strategy)
            worst = max(worst, code)
            print(json.dumps(output, sort_keys=True))
    return worst


def _batch_line(line, number, strategy):
    """Return (output line, exit code) of one batch case."""
    name = f"line {number}"
    try:
        case = json.loads(line)
        if not isinstance(case, dict):
            raise ValueError("a case must be a JSON object")
        name = case.get('name', name)
        missing = {'host', 'request'} - set(case)
        if missing:
            raise ValueError(f"a case needs 'host' and 'request', missing "
                             f"{sorted(missing)}")
        output, elapsed = _fit_case(case['host'], case['request'],
                                    case.get('strategy', strategy))
    except _BAD_INPUT as exc:
        return {'name': name, 'error': str(exc)}, EXIT_FIT_BAD_INPUT
    output.update(name=name, elapsed_us=round(elapsed, 1))
    return output, common.EXIT_OK if output['fits'] else common.EXIT_NO
