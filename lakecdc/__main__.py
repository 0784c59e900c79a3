import sys

from lakecdc.cli import main

sys.exit(main())
