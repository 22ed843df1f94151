"""Parse memory page sizes as operators write them: '2048', '2M', '1GiB'.

A leaf module (no numamig imports), like cpuspec, because configuration
([compute] reserved_huge_pages) and the NUMA engine (hw:mem_page_size)
both read this syntax and numa/ must not import conf/.
"""

_UNITS_KB = {'K': 1, 'M': 1024, 'G': 1024 * 1024}


def parse_page_size_kb(text):
    """Return a page size given as '2048', '2M', '2MB' or '1GiB', in KiB.

    A bare number is in KiB. Sizes must be powers of two of at least
    4 KiB, the only sizes an MMU has.

    :raises ValueError: naming the text and what is wrong with it.
    """
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
