"""`benchflow bisect` (issue 38): which commit, or which release of a tool, made a case
change, found by paired A/B steps over the revisions between a good and a bad one. It
owns the search over revisions, their trees and keys, and the steps' measurement, and
`history confirm`'s use of them (confirm.py: an alert of the history measured again as
the pair of its two runs' commits, then bisected); it imports the A/B stage's
invocations (comparisons/ab.py), the IREE stages, the history's detection, the content keys
and the statistics below it, and only cli/ imports it."""
