import sys

from workers.silo.cli import main

sys.exit(main())
