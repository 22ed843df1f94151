"""Option types shared by several groups."""

from oslo_config import types

from numamig import cpuspec


class CPUSet(types.String):
    """A CPU list such as ``0-7,^3``; rejected at load if unparsable.

    The value stays a string (so the sample config shows what the operator
    wrote); ``parse_cpu_spec`` turns it into a set where it is used.
    """

    def __init__(self, type_name='cpu set value'):
        super().__init__(type_name=type_name)

    def __call__(self, value):
        value = super().__call__(value)
        try:
            cpuspec.parse_cpu_spec(value)
        except cpuspec.CPUSpecError as exc:
            raise ValueError(str(exc))
        return value


class ReservedHugePages(types.Dict):
    """``node:N,size:SIZE,count:C``: pages of a pool no guest may take."""

    def __init__(self):
        super().__init__(value_type=types.String(),
                         type_name='reserved huge pages value')

    def __call__(self, value):
        parsed = super().__call__(value)
        missing = {'node', 'size', 'count'} - set(parsed)
        extra = set(parsed) - {'node', 'size', 'count'}
        if missing or extra:
            raise ValueError(
                f"reserved_huge_pages {value!r} must have exactly the keys "
                f"node, size and count (missing {sorted(missing)}, unknown "
                f"{sorted(extra)})")
        for key in ('node', 'count'):
            if not parsed[key].isdigit():
                raise ValueError(
                    f"reserved_huge_pages {key} {parsed[key]!r} is not a "
                    f"non-negative integer")
        parsed['size'] = page_size_kb(parsed['size'])
        parsed['node'] = int(parsed['node'])
        parsed['count'] = int(parsed['count'])
        return parsed


_UNITS_KB = {'K': 1, 'M': 1024, 'G': 1024 * 1024}


def page_size_kb(text):
    """Return a page size given as '2048', '2M', '2MB' or '1GiB', in KiB."""
    raw = str(text).strip().upper()
    for suffix in ('IB', 'B'):
        if raw.endswith(suffix) and raw[:-len(suffix)][-1:] in _UNITS_KB:
            raw = raw[:-len(suffix)]
    factor = _UNITS_KB.get(raw[-1:], None)
    number = raw[:-1] if factor else raw
    if not number.isdigit():
        raise ValueError(f"page size {text!r} is not a number of KiB or a "
                         f"size with a K/M/G unit")
    size = int(number) * (factor or 1)
    if size < 4 or size & (size - 1):
        raise ValueError(f"page size {text!r} is not a power of two of at "
                         f"least 4 KiB")
    return size
