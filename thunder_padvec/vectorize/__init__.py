"""Vectorization analysis that sees through pad, slice and cat.

:mod:`.projection` walks from the outputs to the inputs and projects the reference's contiguous
inner run onto every node (the rules and worked examples are there); :mod:`.segments` places the
outputs; :mod:`.plan` decides lanes, vector widths and staging for a runtime layout.
"""

from .plan import (
    MAX_ROW_BYTES,
    MAX_VECTOR_BYTES,
    Layout,
    SegmentPlan,
    Staging,
    VectorPlan,
    choose_lanes,
    contiguous_strides,
    plan,
    width_of,
    wider_teams,
)
from .projection import (
    Box,
    Frontier,
    IndexMap,
    Projection,
    Segment,
    Site,
    Store,
    inner_run,
    lane_capacity,
    merge_frontiers,
)
from .segments import project

__all__ = [
    "MAX_ROW_BYTES", "MAX_VECTOR_BYTES", "Layout", "SegmentPlan", "Staging", "VectorPlan", "choose_lanes",
    "contiguous_strides", "plan", "width_of", "wider_teams", "Box", "Frontier", "IndexMap", "Projection", "Segment",
    "Site", "Store", "inner_run", "lane_capacity", "merge_frontiers", "project",
]
