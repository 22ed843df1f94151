"""The scenarios as a test suite that stestr discovers and runs.

See test_scenarios: ``NUMAMIG_CI_ARGS`` names the backend as on the
numamig-ci command line.
"""
