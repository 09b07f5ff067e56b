"""The controller: its decisions as pure functions of the metadata image; the quorum's driver."""
