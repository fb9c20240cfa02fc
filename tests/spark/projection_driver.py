"""A Spark driver running the demo's projection every 100 ms, for the kill-and-restart test.

python projection_driver.py FIRST_TIME_BUCKET (JOURNAL_URL PROCESSOR CHECKPOINT)...

One streaming query per journal (a query's name is its processor's, so each has its own), all
in this one driver: a kill cuts every one of them short, for the price of one Spark start.
"""

from __future__ import annotations

import sys

from ordo.spark import ProjectionSpec, projection, start_session
from ordo.spark.demo import count_order_events


def main() -> None:
    first, *triples = sys.argv[1:]
    spark = start_session(master="local[2]", app_name="ordo-test-driver")
    for url, processor, checkpoint in zip(triples[::3], triples[1::3], triples[2::3], strict=True):
        projection(
            spark,
            ProjectionSpec(processor=processor, sink=url, handler=count_order_events),
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
    spark.streams.awaitAnyTermination()
    spark.stop()


if __name__ == "__main__":
    main()
