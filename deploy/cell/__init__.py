"""The cell of two arms on the robot side: frames, the position reports the arms share, the cell supervisor.

numpy + stdlib only (robot side, like ``deploy.runtime``): never torch, MuJoCo, gymnasium or the training side.

- ``layout``: where the arms stand (arm 0's frame is the cell frame; arm 1's is it turned half a turn about the
  cell centre) and the maps between the frames;
- ``report``: the datagram each runtime sends every command (its position bound grown by its commands in flight,
  stamped and numbered) and that the supervisor passes to the partner;
- ``partner_link``: a runtime's UDP end (send its report, read the partner's newest);
- ``supervisor``: the small process between the two runtimes (loopback UDP, stale detection, restarts).

The separation barrier that uses the partner's report is a part of the runtime: ``deploy.runtime.separation``.
"""
