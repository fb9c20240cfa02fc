"""A Spark driver running the demo's projection every 100 ms, for the kill-and-restart test.

python projection_driver.py JOURNAL_URL FIRST_TIME_BUCKET CHECKPOINT
"""

from __future__ import annotations

import sys

from ordo.spark import ProjectionSpec, projection, start_session
from ordo.spark.demo import count_order_events


def main() -> None:
    url, first, checkpoint = sys.argv[1:4]
    spark = start_session(master="local[2]", app_name="ordo-test-driver")
    query = projection(
        spark,
        ProjectionSpec(processor="killed", sink=url, handler=count_order_events),
        source_options={
            "journal": url,
            "tag": "order",
            "segments": "3",
            "firstTimeBucket": first,
            "eventualConsistencyDelayMs": "0",
            "maxEventsPerTrigger": "20",
        },
        checkpoint=checkpoint,
        processing_time="100 milliseconds",
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
