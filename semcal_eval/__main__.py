import sys

from semcal_eval.cli import main

if __name__ == "__main__":
    sys.exit(main())
