"""Parse and format CPU list specifications such as ``0-7,16-23,^3``.

A leaf module (no numamig imports) because configuration, objects, the NUMA
engine and the libvirt driver all speak this syntax, and the dependency
direction ``conf <- objects <- numa <- virt`` must not be broken for it.
"""

MAX_CPU_ID = 65535


class CPUSpecError(ValueError):
    """Raised when a CPU list specification cannot be parsed."""


def _parse_range(token, spec):
    if '-' in token:
        low, _, high = token.partition('-')
        try:
            low_id, high_id = int(low), int(high)
        except ValueError:
            raise CPUSpecError(f"invalid CPU range {token!r} in {spec!r}")
        if low_id > high_id:
            raise CPUSpecError(
                f"CPU range {token!r} in {spec!r} runs backwards")
        ids = range(low_id, high_id + 1)
    else:
        try:
            ids = [int(token)]
        except ValueError:
            raise CPUSpecError(f"invalid CPU number {token!r} in {spec!r}")
    for cpu in (ids[0], ids[-1]):
        if cpu < 0 or cpu > MAX_CPU_ID:
            raise CPUSpecError(
                f"CPU {cpu} in {spec!r} is outside 0-{MAX_CPU_ID}")
    return set(ids)


def parse_cpu_spec(spec):
    """Return the set of CPU ids a specification names.

    Accepts comma separated ids and ``a-b`` ranges; ``^n`` (or ``^a-b``)
    removes ids from what the other terms name. An empty or blank string
    names no CPU.

    :raises CPUSpecError: naming the offending token.
    """
    if spec is None:
        return set()
    if not isinstance(spec, str):
        raise CPUSpecError(f"CPU specification must be a string, got {spec!r}")
    included, excluded = set(), set()
    for raw in spec.split(','):
        token = raw.strip()
        if not token:
            if spec.strip():
                raise CPUSpecError(f"empty term in CPU specification {spec!r}")
            continue
        if token.startswith('^'):
            excluded |= _parse_range(token[1:].strip(), spec)
        else:
            included |= _parse_range(token, spec)
    if excluded and not included:
        raise CPUSpecError(
            f"CPU specification {spec!r} only excludes CPUs; name the CPUs "
            f"to include as well")
    return included - excluded


def format_cpu_spec(cpus, allow_ranges=True):
    """Return the canonical text form of a collection of CPU ids.

    Consecutive ids collapse into ``a-b`` ranges unless ``allow_ranges`` is
    false (libvirt accepts both; ranges keep logs readable).
    """
    ordered = sorted(set(cpus))
    if not allow_ranges:
        return ','.join(str(c) for c in ordered)
    parts = []
    start = prev = None
    for cpu in ordered:
        if start is None:
            start = prev = cpu
        elif cpu == prev + 1:
            prev = cpu
        else:
            parts.append(_format_run(start, prev))
            start = prev = cpu
    if start is not None:
        parts.append(_format_run(start, prev))
    return ','.join(parts)


def _format_run(start, end):
    # Two consecutive ids are a range too: libvirt writes them that way
    # (``7-8``), so XML numamig writes reads back in the same form.
    if start == end:
        return str(start)
    return f"{start}-{end}"
