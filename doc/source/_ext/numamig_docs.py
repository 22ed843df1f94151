"""Sphinx directives that render numamig's reference pages from the code.

``.. numamig-package-map::`` renders the package map the layering test
enforces (tests/unit/test_layering.py LAYERS), and ``.. numamig-cli::
COMMAND`` the ``--help`` of every command, category and action, so that
neither page can drift from what the code does.
"""

import argparse
import os

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList


def _literal(text):
    return nodes.literal_block(text, text)


def _section(directive, title, ident, children):
    section = nodes.section(ids=[ident])
    section += nodes.title(text=title)
    section.extend(children)
    return section


class PackageMap(Directive):
    """A table of every unit of numamig, what it is, what it may import."""

    def run(self):
        from tests.unit import test_layering
        rows = ['.. list-table::', '   :header-rows: 1',
                '   :widths: 20 40 40', '',
                '   * - unit', '     - what it is', '     - may import']
        for unit, (what, allowed) in test_layering.LAYERS.items():
            rows += [f'   * - ``{unit}``', f'     - {what}',
                     '     - ' + (', '.join(f'``{a}``' for a in allowed)
                                  or 'nothing of numamig')]
        container = nodes.container()
        self.state.nested_parse(StringList(rows), self.content_offset,
                                container)
        return container.children


class CommandLine(Directive):
    """The --help of one console script, and of its categories and
    actions for numamig-manage."""

    required_arguments = 1

    def run(self):
        os.environ['COLUMNS'] = '79'
        command = self.arguments[0]
        if command == 'numamig-manage':
            return self._manage()
        parser = _PARSERS[command]()
        return [_literal(parser.format_help())]

    def _manage(self):
        from numamig.cmd import common
        from numamig.cmd import manage
        parser = argparse.ArgumentParser(prog='numamig-manage')
        categories = parser.add_subparsers(dest='category')
        common.add_command_parsers(
            {name: manage.load_category(name)
             for name in manage.CATEGORIES})(categories)
        sections = [_literal(parser.format_help())]
        for name, category in categories.choices.items():
            actions = next(a for a in category._actions
                           if isinstance(a, argparse._SubParsersAction))
            children = [_literal(category.format_help())]
            for action, action_parser in actions.choices.items():
                children.append(_section(
                    self, f'numamig-manage {name} {action}',
                    f'manage-{name}-{action}',
                    [_literal(action_parser.format_help())]))
            sections.append(_section(self, f'numamig-manage {name}',
                                     f'manage-{name}', children))
        return sections


def _ci_parser():
    from numamig_ci import cmd as ci
    return ci.build_parser()


def _embedded_parser():
    from numamig.cmd import embedded
    return embedded._parser()


_PARSERS = {'numamig-ci': _ci_parser, 'numamig-embedded': _embedded_parser}


def setup(app):
    app.add_directive('numamig-package-map', PackageMap)
    app.add_directive('numamig-cli', CommandLine)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
