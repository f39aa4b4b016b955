"""`python -m extract.ms_measure`: the MetaSchedule measuring campaign on this CPU (the code:
extract/metaschedule/campaign.py)."""
import sys

from extract.metaschedule.campaign import main

if __name__ == "__main__":
    sys.exit(main())
