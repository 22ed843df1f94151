"""numamig's version, as its package metadata (pbr) says.

Read only when asked (``--version``), so that importing numamig stays
free of it.
"""


def version_string():
    from pbr import version
    return version.VersionInfo('numamig').release_string()
