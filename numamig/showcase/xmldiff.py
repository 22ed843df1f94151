"""The NUMA sections of two domain XMLs, and a line diff between them.

Only the parts numamig rewrites for a destination are compared: vCPU
placement (``<vcpu>``, ``<cputune>``), memory placement (``<numatune>``),
huge page backing (``<memoryBacking>``) and the guest cells
(``<cpu><numa>``). Everything else is the same on both sides by design.
"""

import difflib

from lxml import etree

SECTIONS = ('vcpu', 'cputune', 'numatune', 'memoryBacking', 'cpu/numa')


def numa_lines(xml_text):
    """One line per element of the NUMA sections, in document order."""
    doc = etree.fromstring(xml_text.encode())
    lines = []
    for path in SECTIONS:
        for section in doc.iterfind(path):
            lines += _element_lines(section, depth=0)
    return lines


def _element_lines(element, depth):
    attrs = ''.join(f' {k}="{v}"' for k, v in element.attrib.items())
    text = (element.text or '').strip()
    children = [c for c in element if isinstance(c.tag, str)]
    indent = '  ' * depth
    if not children:
        body = f">{text}</{element.tag}>" if text else '/>'
        return [f"{indent}<{element.tag}{attrs}{body}"]
    lines = [f"{indent}<{element.tag}{attrs}>"]
    for child in children:
        lines += _element_lines(child, depth + 1)
    lines.append(f"{indent}</{element.tag}>")
    return lines


def diff(before_xml, after_xml):
    """``- old`` / ``+ new`` lines where the NUMA sections differ.

    Unchanged lines are left out; an empty list means identical.
    """
    before, after = numa_lines(before_xml), numa_lines(after_xml)
    result = []
    for line in difflib.ndiff(before, after):
        if line.startswith(('- ', '+ ')):
            result.append(line)
    return result
