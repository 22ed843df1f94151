"""Sphinx configuration of numamig's documentation (tox -e docs)."""

import os
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
sys.path.insert(0, TOP)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '_ext'))

# The reference pages import the command-line modules; like the console
# scripts, they must not pull in eventlet (numamig._backend).
from numamig import _backend  # noqa: E402

_backend.for_command_line()

project = 'numamig'
copyright = '2026, the numamig developers'
extensions = [
    'oslo_config.sphinxext',
    'reno.sphinxext',
    'numamig_docs',
]
root_doc = 'index'
exclude_patterns = ['_build']
html_theme = 'alabaster'
html_static_path = []
pygments_style = 'sphinx'
# Every warning fails the build (tox -e docs runs sphinx-build -W).
nitpicky = False
