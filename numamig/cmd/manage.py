"""numamig-manage console script (placeholder until its issue lands)."""

import sys


def main():
    sys.stderr.write("numamig-manage: not implemented yet\n")
    return 1


if __name__ == '__main__':
    sys.exit(main())
