import sys

from dpbook.cli import main

sys.exit(main())
