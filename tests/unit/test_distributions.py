"""The runtime distribution is the product; the CI harness is its own.

numamig (setup.cfg, requirements.txt) installs on every hypervisor: it
holds the numamig package only, requires what that package imports and
nothing more, and no entry point of it leads into the harness or the
tests. numamig-ci (numamig_ci/pyproject.toml and requirements.txt)
ships every directory of numamig_ci and requires what the harness
imports beyond numamig. The tests' aids live in tests/, which no
distribution installs (test_layering refuses an import of them).
"""

import ast
import configparser
import fnmatch
import functools
import importlib.metadata as md
import os
import sys
import tomllib

from packaging import requirements as pkg_requirements
from packaging import utils as pkg_utils

import numamig
from tests import base

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(numamig.__file__)))
HARNESS = os.path.join(ROOT, 'numamig_ci')
# The harness's project files, beside its modules (not package data).
HARNESS_PROJECT_FILES = ('pyproject.toml', 'requirements.txt', 'setup.cfg')
# What building or installing leaves in a directory; never shipped.
BUILD_LEFTOVERS = ('__pycache__', '*.egg-info', 'build')
# Imported by numamig only where a deployment chose them, never required:
# the database servers' drivers, which a deployment installs with its
# server (as oslo.db expects), and without which the command line's
# direct reads take the ORM's path (numamig.db.direct).
OPTIONAL = {'psycopg2': "PostgreSQL's driver (numamig.db.direct)",
            'pymysql': "MariaDB's driver (numamig.db.direct)"}


def requirement_lines(path):
    """The requirements of a pip requirements file, comments dropped."""
    with open(path, encoding='utf-8') as handle:
        lines = (line.split('#', 1)[0].strip() for line in handle)
        return [pkg_requirements.Requirement(line) for line in lines
                if line]


def canonical(name):
    return pkg_utils.canonicalize_name(name)


def closure(reqs):
    """The canonical names of ``reqs`` and of everything they pull in,
    as the installed distributions' metadata says (extras followed)."""
    seen = set()
    todo = list(reqs)
    while todo:
        req = todo.pop()
        key = (canonical(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            pulled = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue
        for line in pulled:
            sub = pkg_requirements.Requirement(line)
            if sub.marker is None or any(
                    sub.marker.evaluate({'extra': extra})
                    for extra in (req.extras or {''})):
                todo.append(sub)
    return {name for name, _extras in seen}


def third_party_imports(package_dir):
    """Top-level modules imported by a package that are neither standard
    nor numamig's own."""
    found = set()
    for directory, _dirs, files in os.walk(package_dir):
        for filename in files:
            if not filename.endswith('.py'):
                continue
            with open(os.path.join(directory, filename)) as handle:
                tree = ast.parse(handle.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update(a.name.split('.')[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    found.add(node.module.split('.')[0])
    return {m for m in found if m not in sys.stdlib_module_names and
            m not in ('numamig', 'numamig_ci', '__future__')}


@functools.cache
def _distributions_of_modules():
    return md.packages_distributions()


def providers(module):
    """Canonical names of the installed distributions providing a
    top-level module."""
    return {canonical(d) for d in _distributions_of_modules().get(module,
                                                                  ())}


def runtime_config():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, 'setup.cfg'))
    return parser


def harness_project():
    with open(os.path.join(HARNESS, 'pyproject.toml'), 'rb') as handle:
        return tomllib.load(handle)


def _leftover(name):
    return any(fnmatch.fnmatch(name, pattern) for pattern in BUILD_LEFTOVERS)


class RuntimeDistributionTest(base.TestCase):

    def test_it_holds_the_numamig_package_only(self):
        packages = runtime_config()['files']['packages'].split()
        self.assertEqual(['numamig'], packages)

    def test_no_entry_point_leads_outside_the_runtime(self):
        entry_points = runtime_config()['entry_points']
        outside = [f'{group}: {line.strip()}'
                   for group, lines in entry_points.items()
                   for line in lines.splitlines() if line.strip() and
                   not line.split('=', 1)[1].strip().startswith('numamig.')]
        self.assertEqual([], outside)

    def test_it_requires_what_it_imports(self):
        pulled = closure(requirement_lines(
            os.path.join(ROOT, 'requirements.txt')))
        missing = sorted(m for m in third_party_imports(
            os.path.join(ROOT, 'numamig')) if not providers(m) & pulled
            and m not in OPTIONAL)
        self.assertEqual([], missing, "imported by numamig but in no "
                                      "requirement of requirements.txt")

    def test_each_requirement_is_one_it_imports(self):
        # What only the harness or the tests use stays out of what every
        # hypervisor installs (python-subunit and junitparser were here).
        imported = set().union(*(providers(m) for m in third_party_imports(
            os.path.join(ROOT, 'numamig'))))
        extra = sorted(req.name for req in requirement_lines(
            os.path.join(ROOT, 'requirements.txt'))
            if canonical(req.name) not in imported)
        self.assertEqual([], extra, "in requirements.txt but imported by "
                                    "no module of numamig")


class HarnessDistributionTest(base.TestCase):

    def test_it_requires_what_it_imports_beyond_numamig(self):
        own = requirement_lines(os.path.join(HARNESS, 'requirements.txt'))
        self.assertIn('numamig', [canonical(r.name) for r in own])
        runtime = requirement_lines(os.path.join(ROOT, 'requirements.txt'))
        pulled = closure([r for r in own if canonical(r.name) != 'numamig']
                         + runtime)
        missing = sorted(m for m in third_party_imports(HARNESS)
                         if not providers(m) & pulled)
        self.assertEqual([], missing, "imported by numamig_ci but in no "
                                      "requirement of numamig or of "
                                      "numamig_ci/requirements.txt")

    def test_it_ships_every_directory_and_file(self):
        settings = harness_project()['tool']['setuptools']
        self.assertEqual({'numamig_ci': '.'}, settings['package-dir'])
        data = settings.get('package-data', {})
        directories, unshipped = [], []
        for directory, dirs, files in os.walk(HARNESS):
            dirs[:] = [d for d in dirs if not _leftover(d)]
            rel = os.path.relpath(directory, HARNESS)
            package = 'numamig_ci' if rel == '.' else \
                'numamig_ci.' + rel.replace(os.sep, '.')
            directories.append(package)
            for filename in files:
                if filename.endswith(('.py', '.pyc')) or (
                        rel == '.' and filename in HARNESS_PROJECT_FILES):
                    continue
                if not any(fnmatch.fnmatch(filename, pattern)
                           for pattern in data.get(package, ())):
                    unshipped.append(os.path.join(rel, filename))
        self.assertEqual(sorted(directories), sorted(settings['packages']))
        self.assertEqual([], unshipped, "not in the wheel: add them to "
                                        "[tool.setuptools.package-data]")

    def test_its_console_script(self):
        scripts = harness_project()['project']['scripts']
        self.assertEqual({'numamig-ci': 'numamig_ci.cmd:main'}, scripts)
        from numamig_ci import cmd
        self.assertTrue(callable(cmd.main))

    def test_its_requirements_come_from_its_own_file(self):
        project = harness_project()
        self.assertEqual(['dependencies'], project['project']['dynamic'])
        self.assertEqual(
            {'file': ['requirements.txt']},
            project['tool']['setuptools']['dynamic']['dependencies'])
