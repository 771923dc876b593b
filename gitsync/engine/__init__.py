"""The pure core: the schema's rules by a field's position (``fieldrules``), field
ownership from managedFields (``managedfields``), drift and
who caused it (``drift``), what a sync writes to each object (``planner``), a pass's plan
as values (``changeset``, ``namespace_plan``), the prune's guards (``prune``), real
differences in words and as a unified diff (``differences``), and where each live value
came from (``blame``).

No I/O. May import model and errors only.
"""
