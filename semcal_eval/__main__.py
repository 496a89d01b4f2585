from semcal_eval.cli import main
import sys
sys.exit(main())
