"""Entry point for spark-submit: the same job as `groupfit rates-job`, with the same options."""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main(["rates-job", *sys.argv[1:]]))
