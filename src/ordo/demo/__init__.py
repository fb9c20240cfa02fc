"""The main job's workload: a shop whose writer processes append orders, payments and shipments."""
