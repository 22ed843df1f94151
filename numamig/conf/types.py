"""Option types shared by several groups."""

from oslo_config import types

from numamig import cpuspec
from numamig import pagesize


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


def page_size_kb(text):
    """Return a page size in KiB (see numamig.pagesize); ValueError if bad."""
    return pagesize.parse_page_size_kb(text)
